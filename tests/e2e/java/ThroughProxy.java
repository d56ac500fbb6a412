import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java client (kafka-clients 4.3), pointed only at the proxy. Each command does one
 * family of work, prints "key=value" lines the test reads, and fails with a non-zero exit and
 * the client's exception when something does not work as it would against Kafka itself.
 */
public final class ThroughProxy {
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long DEADLINE_MS = 90_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        switch (args[0]) {
            case "admin" -> admin(bootstrap, args[2]);
            case "produce" -> produce(bootstrap, args[2], Integer.parseInt(args[3]));
            case "transactions" -> transactions(bootstrap, args[2], args[3]);
            case "group" -> group(bootstrap, args[2], args[3], Integer.parseInt(args[4]));
            case "share" -> share(bootstrap, args[2], args[3], Integer.parseInt(args[4]));
            case "shareadmin" -> shareAdmin(bootstrap, args[2], args[3], args[4]);
            case "classic" -> classic(bootstrap, args[2], args[3]);
            case "keyed" -> keyed(bootstrap, args[2], args[3], Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]));
            case "polling" -> polling(bootstrap, args[2], args[3], Long.parseLong(args[4]));
            case "scheduled" -> scheduled(bootstrap, args[2], args[3], Integer.parseInt(args[4]),
                    Long.parseLong(args[5]));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Properties props(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "30000");
        return p;
    }

    private static void out(String key, Object value) {
        System.out.println(key + "=" + value);
    }

    /** Topics and configs: create, describe, alter, delete, as an operator's tool would. */
    private static void admin(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap))) {
            out("cluster.nodes", admin.describeCluster().nodes().get().size());
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            out("topic.partitions", d.partitions().size());
            out("listed", admin.listTopics().names().get().contains(topic));
            try {
                admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
                out("create.again", "NONE");
            } catch (ExecutionException e) {
                out("create.again", e.getCause().getClass().getSimpleName());
            }
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            AlterConfigOp set = new AlterConfigOp(
                new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(set))).all().get();
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            ConfigEntry retention = config.get("retention.ms");
            out("config.retention.ms", retention == null ? "absent" : retention.value());
            admin.deleteTopics(List.of(topic)).all().get();
            long until = System.currentTimeMillis() + 30_000;
            boolean gone = false;
            while (!gone && System.currentTimeMillis() < until) {
                try {
                    admin.describeTopics(List.of(topic)).allTopicNames().get();
                    Thread.sleep(200);
                } catch (ExecutionException e) {
                    gone = e.getCause() instanceof UnknownTopicOrPartitionException;
                    if (!gone) throw e;
                }
            }
            out("deleted", gone);
        }
    }

    /**
     * The classic-group calls an operator's tool makes, for a group that may be a share group:
     * describeClassicGroups (DescribeGroups) and deleteConsumerGroupOffsets (OffsetDelete). Each
     * prints what it got: the state, or the exception's class.
     */
    private static void classic(String bootstrap, String groupId, String topic) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap))) {
            try {
                var d = admin.describeClassicGroups(List.of(groupId)).all().get().get(groupId);
                out("describe.classic", d.state());
                out("describe.classic.members", d.members().size());
            } catch (ExecutionException e) {
                out("describe.classic", e.getCause().getClass().getSimpleName());
            }
            try {
                admin.deleteConsumerGroupOffsets(groupId, Set.of(new TopicPartition(topic, 0)))
                    .all().get();
                out("offset.delete", "NONE");
            } catch (ExecutionException e) {
                out("offset.delete", e.getCause().getClass().getSimpleName());
            }
        }
    }

    /** The default producer: idempotent since Kafka 3.0, so it needs InitProducerId. */
    private static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = props(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
        out("produced", count);
    }

    /** A committed and an aborted transaction; a read_committed consumer sees only the first. */
    private static void transactions(String bootstrap, String topic, String txId) throws Exception {
        Properties p = props(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("transactional.id", txId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(topic, 0, "k", "committed"));
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, "k", "aborted"));
            producer.flush();
            producer.abortTransaction();
        }
        Properties c = consumerProps(bootstrap);
        c.put("isolation.level", "read_committed");
        Map<String, Integer> seen = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long until = System.currentTimeMillis() + DEADLINE_MS;
            // the end of a read_committed log is the last stable offset: past both transactions
            while (consumer.position(tp) < consumer.endOffsets(List.of(tp)).get(tp)
                    && System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    seen.merge(r.value(), 1, Integer::sum);
                }
            }
        }
        out("read.committed", seen.getOrDefault("committed", 0));
        out("read.aborted", seen.getOrDefault("aborted", 0));
    }

    private static Properties consumerProps(String bootstrap) {
        Properties c = props(bootstrap);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return c;
    }

    /** A classic consumer group: subscribe (JoinGroup/SyncGroup), read everything, commit. */
    private static void group(String bootstrap, String topic, String groupId, int count)
            throws Exception {
        Properties c = consumerProps(bootstrap);
        c.put("group.id", groupId);
        c.put("group.protocol", "classic");
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        int read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + DEADLINE_MS;
            while (read < count && System.currentTimeMillis() < until) {
                read += consumer.poll(POLL).count();
            }
            consumer.commitSync();
            out("group.read", read);
            long committed = 0;
            Set<TopicPartition> assigned = consumer.assignment();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    consumer.committed(assigned).entrySet()) {
                if (e.getValue() != null) committed += e.getValue().offset();
            }
            out("group.committed", committed);
        }
        try (Admin admin = Admin.create(props(bootstrap))) {
            long listed = 0;
            for (OffsetAndMetadata o : admin.listConsumerGroupOffsets(groupId)
                    .partitionsToOffsetAndMetadata().get().values()) {
                listed += o.offset();
            }
            out("admin.committed", listed);
        }
    }

    /**
     * A share consumer with explicit acknowledgement: the first record it sees is rejected, the
     * second released (it must come back with delivery count 2), the rest accepted.
     */
    private static void share(String bootstrap, String topic, String groupId, int count)
            throws Exception {
        Properties c = consumerProps(bootstrap);
        c.put("group.id", groupId);
        c.put("share.acknowledgement.mode", "explicit");
        Set<String> accepted = new HashSet<>();
        String rejected = null;
        String released = null;
        int redeliveredCount = 0;
        List<String> problems = new ArrayList<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + DEADLINE_MS;
            while (accepted.size() < count - 1 && System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    String id = r.partition() + ":" + r.offset();
                    short delivery = r.deliveryCount().orElse((short) 0);
                    if (id.equals(rejected) || accepted.contains(id)) problems.add("again " + id);
                    if (rejected == null) {
                        rejected = id;
                        consumer.acknowledge(r, AcknowledgeType.REJECT);
                    } else if (released == null) {
                        released = id;
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    } else {
                        if (id.equals(released)) redeliveredCount = delivery;
                        accepted.add(id);
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                results.forEach((tp, error) -> error.ifPresent(e -> problems.add(tp + " " + e)));
            }
        }
        out("share.accepted", accepted.size());
        out("share.rejected", rejected);
        out("share.released.redelivered.count", redeliveredCount);
        out("share.problems", problems);
    }

    /** The simple name of what ``call`` threw (its cause, for a future's failure), or NONE. */
    private static String outcome(KafkaFutureCall call) {
        try {
            call.run();
            return "NONE";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    @FunctionalInterface
    private interface KafkaFutureCall {
        void run() throws Exception;
    }

    /** Reads (and accepts) at least one record of ``topic`` in ``groupId``, then stays. */
    private static KafkaShareConsumer<String, String> member(
            String bootstrap, String topic, String groupId) {
        Properties c = consumerProps(bootstrap);
        c.put("group.id", groupId);
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c);
        consumer.subscribe(List.of(topic));
        long until = System.currentTimeMillis() + DEADLINE_MS;
        int read = 0;
        while (read == 0 && System.currentTimeMillis() < until) read += consumer.poll(POLL).count();
        consumer.commitSync();
        if (read == 0) throw new IllegalStateException("no record of " + topic + " arrived");
        return consumer;
    }

    /** The group as describeShareGroups shows it once it is empty: state/groupEpoch/assignmentEpoch. */
    private static String emptyGroup(Admin admin, String groupId) throws Exception {
        long until = System.currentTimeMillis() + 30_000;
        ShareGroupDescription d;
        do {
            d = admin.describeShareGroups(List.of(groupId)).all().get().get(groupId);
            if (d.members().isEmpty()) break;
            Thread.sleep(200);
        } while (System.currentTimeMillis() < until);
        return d.groupState().name() + "/" + d.groupEpoch() + "/" + d.targetAssignmentEpoch();
    }

    /**
     * Scheduled delivery: ``count`` records produced through the proxy, every other one with an
     * x-deliver-at header ``delayMs`` ahead (as the scheduled-delivery page shows it), then read by a share
     * consumer, which notes how each came against its time.
     */
    private static void scheduled(
            String bootstrap, String topic, String groupId, int count, long delayMs)
            throws Exception {
        Properties p = props(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long due = System.currentTimeMillis() + delayMs;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> record = new ProducerRecord<>(topic, 0, null, "r" + i);
                if (i % 2 == 1) {
                    record.headers().add("x-deliver-at",
                            Long.toString(due).getBytes(StandardCharsets.US_ASCII));
                }
                producer.send(record).get();
            }
        }
        Properties c = consumerProps(bootstrap);
        c.put("group.id", groupId);
        int atOnce = 0;
        int beforeDue = 0; // of those at once
        int timed = 0;
        int early = 0; // of those timed
        long latestMs = 0;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + DEADLINE_MS;
            while (atOnce + timed < count && System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    long now = System.currentTimeMillis();
                    if (r.headers().lastHeader("x-deliver-at") == null) {
                        atOnce++;
                        if (now < due) beforeDue++;
                    } else {
                        timed++;
                        if (now < due) early++;
                        latestMs = Math.max(latestMs, now - due);
                    }
                }
                consumer.commitSync();
            }
        }
        out("scheduled.at.once", atOnce);
        out("scheduled.at.once.before.due", beforeDue);
        out("scheduled.timed", timed);
        out("scheduled.early", early);
        out("scheduled.late.ms", latestMs);
    }

    /** A share group member that only polls (implicit acknowledgement) for a while. */
    private static void polling(String bootstrap, String topic, String groupId, long seconds)
            throws Exception {
        Properties c = consumerProps(bootstrap);
        c.put("group.id", groupId);
        long polled = 0;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + seconds * 1000;
            while (System.currentTimeMillis() < until) {
                polled += consumer.poll(POLL).count();
            }
        }
        out("polling.records", polled);
    }

    /**
     * The share-group admin calls against a group that does not exist, one with a member, and
     * the same group once empty: which exception each throws, and the epochs it describes.
     */
    private static void shareAdmin(String bootstrap, String topic, String other, String groupId)
            throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        TopicPartition otherTp = new TopicPartition(other, 0);
        try (Admin admin = Admin.create(props(bootstrap))) {
            out("alter.unknown", outcome(() ->
                    admin.alterShareGroupOffsets(groupId, Map.of(tp, 0L)).all().get()));
            out("describe.unknown", outcome(() ->
                    admin.describeShareGroups(List.of(groupId)).all().get()));
            member(bootstrap, other, groupId).close();
            try (KafkaShareConsumer<String, String> live = member(bootstrap, topic, groupId)) {
                out("delete.live", outcome(() ->
                        admin.deleteShareGroupOffsets(groupId, Set.of(other)).all().get()));
                out("alter.live", outcome(() ->
                        admin.alterShareGroupOffsets(groupId, Map.of(tp, 0L)).all().get()));
                Map<TopicPartition, SharePartitionOffsetInfo> kept = admin
                        .listShareGroupOffsets(Map.of(groupId, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(groupId).get();
                out("live.kept.other", kept.containsKey(otherTp));
            }
            out("epochs.left", emptyGroup(admin, groupId));
            out("alter.empty", outcome(() ->
                    admin.alterShareGroupOffsets(groupId, Map.of(tp, 0L)).all().get()));
            out("epochs.altered", emptyGroup(admin, groupId));
            out("delete.empty", outcome(() ->
                    admin.deleteShareGroupOffsets(groupId, Set.of(other)).all().get()));
        }
    }

    /** One delivery as a consumer processed it: from its poll to its acknowledgement. */
    private record Attempt(String key, long offset, long start, long end, boolean accepted,
            int consumer) {}

    /**
     * Key-ordered share delivery: several share consumers on one partition, each processing
     * 1-3 ms per record and releasing every record whose offset is a multiple of 13 on its
     * first delivery. Per key, no two processing intervals may overlap and offsets must be
     * processed in order; what breaks that is printed as a violation.
     */
    private static void keyed(String bootstrap, String topic, String groupId, int count,
            int consumers) throws Exception {
        Set<Long> accepted = ConcurrentHashMap.newKeySet();
        List<Attempt> attempts = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        long until = System.currentTimeMillis() + DEADLINE_MS;
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            int me = i;
            Thread t = new Thread(() -> {
                Properties c = consumerProps(bootstrap);
                c.put("group.id", groupId);
                c.put("share.acknowledgement.mode", "explicit");
                try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c)) {
                    consumer.subscribe(List.of(topic));
                    while (accepted.size() < count && System.currentTimeMillis() < until) {
                        ConsumerRecords<String, String> polled = consumer.poll(POLL);
                        long start = System.nanoTime(); // processing starts once poll returns
                        List<Attempt> mine = new ArrayList<>();
                        for (ConsumerRecord<String, String> r : polled) {
                            Thread.sleep(ThreadLocalRandom.current().nextInt(1, 4));
                            short delivery = r.deliveryCount().orElse((short) 0);
                            boolean release = delivery == 1 && r.offset() % 13 == 0;
                            consumer.acknowledge(
                                    r, release ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                            long end = System.nanoTime();
                            mine.add(new Attempt(r.key(), r.offset(), start, end, !release, me));
                            start = end;
                        }
                        Map<TopicIdPartition, Optional<KafkaException>> results =
                                consumer.commitSync();
                        synchronized (attempts) {
                            attempts.addAll(mine);
                            results.forEach((tp, e) -> e.ifPresent(x -> problems.add(tp + " " + x)));
                        }
                        for (Attempt a : mine) if (a.accepted()) accepted.add(a.offset());
                    }
                } catch (Exception e) {
                    synchronized (attempts) {
                        problems.add("consumer " + me + ": " + e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        Map<String, List<Attempt>> byKey = new HashMap<>();
        for (Attempt a : attempts) byKey.computeIfAbsent(a.key(), k -> new ArrayList<>()).add(a);
        List<String> violations = new ArrayList<>();
        for (List<Attempt> seq : byKey.values()) {
            seq.sort((a, b) -> Long.compare(a.start(), b.start()));
            for (int i = 1; i < seq.size(); i++) {
                Attempt before = seq.get(i - 1);
                Attempt after = seq.get(i);
                if (after.start() < before.end()) violations.add("overlap " + before + " " + after);
                if (after.offset() < before.offset()
                        || (before.accepted() && after.offset() == before.offset())) {
                    violations.add("order " + before + " " + after);
                }
            }
        }
        Set<Integer> workers = new HashSet<>();
        int released = 0;
        for (Attempt a : attempts) {
            if (a.accepted()) workers.add(a.consumer());
            else released++;
        }
        out("keyed.accepted", accepted.size());
        out("keyed.released", released);
        out("keyed.workers", workers.size());
        out("keyed.violations", violations.subList(0, Math.min(10, violations.size())));
        out("keyed.problems", problems);
    }

    private ThroughProxy() {}
}
