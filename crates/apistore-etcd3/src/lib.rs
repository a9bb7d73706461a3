//! apistore-etcd3 (being built).
