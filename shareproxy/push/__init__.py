"""Push delivery (beyond KIP-932): a share group's records POSTed to an HTTP endpoint, one
CloudEvent each, the endpoint's answers acknowledging them. A front end beside the Kafka
protocol's, REST's and the batch jobs': it consumes on the endpoint's behalf through the
runtime's faces."""
