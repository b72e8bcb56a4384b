//! The release listener on a Redis Cluster: sharded pub/sub.
