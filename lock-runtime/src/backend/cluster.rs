//! Redis Cluster: each lock in one hash slot, sharded release messages.
