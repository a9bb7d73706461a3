//! [`TransformError`]: why a value could not be read from or written to storage.
//!
//! Messages are kube-apiserver's own (`pkg/storage/value` and its `encrypt/*` packages),
//! so logs and API errors read the same as they would from a Go API server.

/// Why a value could not be transformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The identity transformer met a value that carries an encryption prefix. The
    /// message starts with kube-apiserver's words and goes on to name the provider and
    /// key the value needs, so that the configuration missing it can be found.
    #[error(
        "identity transformer tried to read encrypted data (the value is encrypted with \
         {encryption}; no encryption configuration entry for its resource has it)"
    )]
    EncryptedDataWithoutKey {
        /// The provider and key the value's prefix names (`aesgcm:key1`, `kms:vault`),
        /// as [`crate::encryption_name`] reads it.
        encryption: String,
    },
    /// No configured provider recognised the value's prefix (the error kube-apiserver's
    /// encryption configuration gives at provider level).
    #[error("no matching prefix found")]
    NoMatchingPrefix,
    /// No key of a provider recognised the value's key-name prefix. The field names the
    /// provider as kube-apiserver does: `AES` (aesgcm and aescbc) or `Secretbox`.
    #[error("no matching key was found for the provided {0} transformer")]
    NoMatchingKey(&'static str),
    /// No transformer of a prefix list recognised the value (the default error of a
    /// prefix list built without one).
    #[error("the provided value does not match any of the supported transformers")]
    NoMatchingTransformer,
    /// A prefix list with no entries was asked to write.
    #[error("no transformer is configured to write with")]
    NoWriteTransformer,
    /// The stored data is too short for the cipher's layout.
    #[error("the stored data was shorter than the required size")]
    TooShort,
    /// AES-CBC: the ciphertext after the IV is not a whole number of blocks.
    #[error("the stored data is not a multiple of the block size")]
    NotBlockAligned,
    /// AES-CBC: the last byte of the plaintext is not a valid PKCS#7 pad length.
    #[error("invalid PKCS7 data (empty or not padded)")]
    InvalidPkcs7Data,
    /// AES-CBC: the PKCS#7 pad bytes disagree with the pad length.
    #[error("invalid padding on input")]
    InvalidPkcs7Padding,
    /// A key of the wrong size was given to a cipher.
    #[error("{cipher}: invalid key size {got}")]
    InvalidKeySize {
        /// The cipher the key was meant for.
        cipher: &'static str,
        /// The size given, in bytes.
        got: usize,
    },
    /// The operating system's random source failed.
    #[error("unable to read sufficient random bytes: {0}")]
    Random(String),
    /// Decryption or authentication failed (wrong key, tampered data, wrong etcd key).
    #[error("{0}")]
    Crypto(String),
    /// The KMS v2 envelope or its plugin failed; the message names the provider and,
    /// where there is one, the key id (by its SHA-256, as kube does).
    #[error("{0}")]
    Kms(String),
    /// Several transformers matched the value's prefix and all failed. Shown as
    /// kube-apiserver shows an aggregate: the distinct messages, `[a, b]`.
    #[error("{}", aggregate_message(.0))]
    Aggregate(Vec<Self>),
}

impl TransformError {
    /// Folds the errors collected while trying a prefix list, as kube's
    /// `errors.Reduce(errors.NewAggregate(errs))` does: none gives `None`, one is
    /// returned as it is, more become an [`TransformError::Aggregate`].
    pub fn reduce(mut errors: Vec<Self>) -> Option<Self> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Self::Aggregate(errors)),
        }
    }
}

/// kube's aggregate message: distinct messages in order, bracketed when more than one.
fn aggregate_message(errors: &[TransformError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for err in errors {
        let msg = err.to_string();
        if !seen.contains(&msg) {
            seen.push(msg);
        }
    }
    let joined = seen.join(", ");
    if seen.len() == 1 {
        joined
    } else {
        format!("[{joined}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_unwraps_a_single_error() {
        assert_eq!(TransformError::reduce(vec![]), None);
        assert_eq!(
            TransformError::reduce(vec![TransformError::TooShort]),
            Some(TransformError::TooShort)
        );
    }

    #[test]
    fn aggregate_message_deduplicates_like_kube() {
        let agg = TransformError::Aggregate(vec![
            TransformError::TooShort,
            TransformError::TooShort,
            TransformError::InvalidPkcs7Padding,
        ]);
        assert_eq!(
            agg.to_string(),
            "[the stored data was shorter than the required size, invalid padding on input]"
        );
        let same =
            TransformError::Aggregate(vec![TransformError::TooShort, TransformError::TooShort]);
        assert_eq!(
            same.to_string(),
            "the stored data was shorter than the required size"
        );
    }
}
