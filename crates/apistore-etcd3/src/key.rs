//! Key preparation: `apistore-backend`'s, the one every backend uses.

pub use apistore_backend::key::prefix_range_end;
pub(crate) use apistore_backend::key::{as_directory, path_prefix, prepare_key};
