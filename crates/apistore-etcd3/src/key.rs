//! Key preparation: `apistore-backend`'s, the one every backend uses.

pub(crate) use apistore_backend::key::as_directory;
pub use apistore_backend::key::prefix_range_end;
