//! Key preparation: `apistore-backend`'s, the one every backend uses (the etcd3 store's
//! too), so the same caller key maps to the same stored key in each.

pub(crate) use apistore_backend::key::{as_directory, path_prefix, prepare_key};
