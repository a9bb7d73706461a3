//! Random bytes for nonces and IVs, from the operating system, failing as an error
//! rather than a panic.

use rand::RngCore;
use rand::rngs::OsRng;

use crate::{Result, TransformError};

/// Fills `buf` from the operating system's random source.
pub(crate) fn fill(buf: &mut [u8]) -> Result<()> {
    OsRng
        .try_fill_bytes(buf)
        .map_err(|err| TransformError::Random(err.to_string()))
}
