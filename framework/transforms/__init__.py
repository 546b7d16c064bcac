"""The built-in single message transforms and predicates, registered like any plugin's.

They are Kafka Connect's, with Connect's setting names and defaults, and answer to Connect's
Java class names too (``org.apache.kafka.connect.transforms.RegexRouter``,
``org.apache.kafka.connect.transforms.InsertField$Value`` ...), so connector configs and
``mm2.properties`` files written for Connect work unchanged. Like a third-party plugin, this
package imports only :mod:`mirrorline.api` and is found through its entry point.
"""

from mirrorline.api import hookimpl


@hookimpl
def register_transforms():
    """The built-in transforms."""
    from mirrorline.transforms.fields import (
        InsertFieldKey,
        InsertFieldValue,
        MaskFieldKey,
        MaskFieldValue,
        ReplaceFieldKey,
        ReplaceFieldValue,
    )
    from mirrorline.transforms.headers import DropHeaders, HeaderFromKey, HeaderFromValue, InsertHeader
    from mirrorline.transforms.routing import Filter, RegexRouter, TimestampRouter

    return [RegexRouter, TimestampRouter, Filter, InsertHeader, DropHeaders, HeaderFromKey, HeaderFromValue,
            InsertFieldKey, InsertFieldValue, ReplaceFieldKey, ReplaceFieldValue, MaskFieldKey, MaskFieldValue]


@hookimpl
def register_predicates():
    """The built-in predicates."""
    from mirrorline.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches

    return [TopicNameMatches, HasHeaderKey, RecordIsTombstone]
