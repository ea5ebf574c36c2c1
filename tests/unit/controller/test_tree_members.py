"""Cache.tree_members, kept per cohort tree while the trees keep their shape, follows every change of shape."""

from __future__ import annotations

import random

from sluicegate.controller.cache import Cache
from sluicegate.model.names import ClusterQueueName, CohortName


def members_now(c: Cache, cq: ClusterQueueName) -> set[str]:
    node = c.tree.cluster_queues.get(cq)
    if node is None:
        return {cq}
    return {n.name for n in node.root().subtree_cluster_queues()}


def test_tree_members_follow_queues_and_cohorts_coming_going_and_moving() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        c = Cache()
        queues = [ClusterQueueName(f"cq{i}") for i in range(8)]
        cohorts = [CohortName(f"co{i}") for i in range(4)]
        for _ in range(80):
            action = rng.random()
            if action < 0.5:
                c.tree.set_cluster_queue(rng.choice(queues), quotas={}, cohort=rng.choice([None, *cohorts]))
            elif action < 0.65:
                c.tree.remove_cluster_queue(rng.choice(queues))
            elif action < 0.85:
                name = rng.choice(cohorts)
                parent = rng.choice([None, *[p for p in cohorts if p != name]])
                # A cohort whose parent would be below it is refused by validation before it gets here.
                ancestors = {a.name for a in c.tree.cohorts[parent].path_to_root()} if parent in c.tree.cohorts else set()
                if parent is None or (name not in ancestors and parent != name):
                    c.tree.set_cohort(name, quotas={}, parent=parent)
            else:
                c.tree.remove_cohort(rng.choice(cohorts))
            for cq in rng.sample(queues, 3):
                assert set(c.tree_members(cq)) == members_now(c, cq), seed
