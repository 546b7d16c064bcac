"""Grant and revoke Kafka ACLs from tests, against a local cluster running an authorizer.

Creating and describing ACLs goes through :func:`mirrorline.clients.kafka_admin.create_acls` and
:func:`~mirrorline.clients.kafka_admin.describe_acls` (the product's own implementation, used by
the mirror's ACL sync); deleting, which the product never does, sends aiokafka's DeleteAcls
request class here. Kafka forwards ACL changes to the KRaft controller, and a broker applies
them once it has read them back from the metadata log, so :func:`grant` and :func:`revoke`
poll DescribeAcls until the broker they asked shows the change.

Use these with an admin client authenticated as a super user (``ClusterSpec.client_properties()``
gives the cluster's ``admin``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import DeleteAclsRequest

from mirrorline.clients.kafka_admin import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    create_acls,
    describe_acls,
)
from mirrorline.clients.kafka_clients import client_kwargs

#: Kafka's ResourceType codes.
RESOURCE_TYPES = {"topic": 2, "group": 3, "cluster": 4, "transactional_id": 5}
#: Kafka's AclOperation codes.
OPERATIONS = {"all": 2, "read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7, "describe": 8,
              "cluster_action": 9, "describe_configs": 10, "alter_configs": 11, "idempotent_write": 12}
PATTERN_LITERAL = 3
PATTERN_PREFIXED = 4
PERMISSION_ALLOW = 3
PERMISSION_DENY = 2
#: The name of the single cluster resource.
CLUSTER_RESOURCE = "kafka-cluster"


@dataclass(frozen=True)
class Acl:
    """One rule: ``principal`` (``User:name``) may do ``operation`` on a resource from ``host``.

    ``resource_type`` is a key of :data:`RESOURCE_TYPES`, ``operation`` a key of :data:`OPERATIONS`;
    ``prefixed`` makes ``resource_name`` a prefix rather than a literal name; ``deny`` makes it a
    DENY rule instead of ALLOW.
    """

    principal: str
    operation: str
    resource_type: str
    resource_name: str = CLUSTER_RESOURCE
    prefixed: bool = False
    host: str = "*"
    deny: bool = False

    def binding(self) -> AclBinding:
        """This rule as the product's :class:`~mirrorline.clients.kafka_admin.AclBinding`."""
        return AclBinding(ResourceType(RESOURCE_TYPES[self.resource_type]), self.resource_name,
                          PatternType.PREFIXED if self.prefixed else PatternType.LITERAL, self.principal, self.host,
                          AclOperation(OPERATIONS[self.operation]),
                          AclPermissionType.DENY if self.deny else AclPermissionType.ALLOW)


def topic_acls(principal: str, topic: str, *operations: str) -> list[Acl]:
    """ALLOW rules for ``principal`` on the literal topic ``topic``, one per operation."""
    return [Acl(principal, op, "topic", topic) for op in operations]


async def _shown(admin: AIOKafkaAdminClient, node_id: int, acl: Acl) -> bool:
    return bool(await describe_acls(admin, AclFilter.exactly(acl.binding()), node_id))


async def grant(admin_props: dict[str, str], acls: list[Acl], timeout: float = 30.0) -> None:
    """Create ``acls`` on the cluster ``admin_props`` reaches; return once a broker enforces them.

    ``admin_props``: Java-style client settings of a super user (e.g. ``spec.client_properties()``).
    """
    kwargs, _ = client_kwargs(admin_props, "admin")
    admin = AIOKafkaAdminClient(**kwargs)
    await admin.start()
    try:
        node_id = admin._client.get_random_node()
        failures = await create_acls(admin, [acl.binding() for acl in acls], node_id)
        if failures:
            raise failures[0][1]
        await _wait_shown(admin, node_id, acls, True, timeout)
    finally:
        await admin.close()


async def revoke(admin_props: dict[str, str], acls: list[Acl], timeout: float = 30.0) -> None:
    """Delete ``acls`` (exact matches); return once a broker no longer enforces them."""
    kwargs, _ = client_kwargs(admin_props, "admin")
    admin = AIOKafkaAdminClient(**kwargs)
    await admin.start()
    try:
        node_id = admin._client.get_random_node()
        for acl in acls:
            b = acl.binding()
            request = DeleteAclsRequest(int(b.resource_type), b.resource_name, int(b.pattern_type), b.principal,
                                        b.host, int(b.operation), int(b.permission_type))
            response = await admin._client.send(node_id, request)
            for result in response.filter_responses:
                if result[0]:
                    raise for_code(result[0])(f"deleting ACL {acl}: {result[1] or 'no message'}")
        await _wait_shown(admin, node_id, acls, False, timeout)
    finally:
        await admin.close()


async def _wait_shown(admin: AIOKafkaAdminClient, node_id: int, acls: list[Acl], shown: bool,
                      timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for acl in acls:
        while await _shown(admin, node_id, acl) != shown:
            if loop.time() > deadline:
                raise TimeoutError(f"ACL {acl} still {'not ' if shown else ''}in effect after {timeout:g}s")
            await asyncio.sleep(0.1)
