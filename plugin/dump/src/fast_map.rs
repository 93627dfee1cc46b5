//! The hash maps of the readers and the graph builder.

/// A `HashMap` with a fast non-cryptographic hash (foldhash): the readers and the graph builder
/// look up every op and node name several times, and SipHash was a tenth of building a graph.
/// Names come from local files, not from the network, so flooding is not a concern.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` with the hash of [`FastMap`], for the same reasons.
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
