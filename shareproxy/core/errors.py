"""Kafka error codes (one home for every code the proxy names) and the exception carrying one."""

from enum import IntEnum


class ErrorCode(IntEnum):
    """The Kafka error codes the proxy decides or reads, numbered as in Kafka's ``Errors``."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    INVALID_REQUIRED_ACKS = 21
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    INVALID_TRANSACTION_TIMEOUT = 50
    OPERATION_NOT_ATTEMPTED = 55
    SASL_AUTHENTICATION_FAILED = 58
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    RESOURCE_NOT_FOUND = 91
    UNKNOWN_TOPIC_ID = 100
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    SHARE_SESSION_LIMIT_REACHED = 133


# what a per-partition error of ShareFetch / ShareAcknowledge says (ErrorMessage,
# AcknowledgeErrorMessage), so that a client's log tells why without a code table
_PARTITION_MESSAGES: dict[int, str] = {  # by ErrorCode
    ErrorCode.UNKNOWN_TOPIC_ID: "no topic has this id: it was deleted, or never existed",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "the topic has no such partition",
    ErrorCode.INVALID_RECORD_STATE: (
        "the records are not acquired by this member: acknowledged already, their lock "
        "timed out, or never delivered to it"
    ),
    ErrorCode.INVALID_REQUEST: (
        "the acknowledgement batches are malformed, or reach past the records delivered"
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "not authorized to read the topic",
    ErrorCode.FENCED_STATE_EPOCH: "the share-partition was taken over (state epoch moved on)",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "the share-group state store is unavailable: retry",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "not led here now (another proxy node leads it, its state could not be loaded, or "
        "the upstream leader did not answer): refresh metadata and retry"
    ),
    ErrorCode.NETWORK_EXCEPTION: "the upstream cluster could not be reached: retry",
    ErrorCode.REQUEST_TIMED_OUT: "the upstream cluster did not answer in time: retry",
}


def partition_error_message(code: int) -> str | None:
    """The message sent beside a per-partition error code; None beside NONE."""
    if code == ErrorCode.NONE:
        return None
    known = _PARTITION_MESSAGES.get(code)
    if known is not None:
        return known
    try:
        return ErrorCode(code).name.lower().replace("_", " ")
    except ValueError:
        return f"error {code}"


class ShareError(Exception):
    """A refusal with a Kafka error code; whatever raised it changed nothing."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
