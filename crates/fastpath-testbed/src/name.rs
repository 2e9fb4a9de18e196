//! Test bed names: what a name may be (the bottom of the crate: bed, fwd and netns use it).

use crate::TestbedError;

/// Longest accepted test bed name: interface `<name>a` must fit IFNAMSIZ-1 = 15 bytes, and
/// 12 leaves room for the NAPI thread name `napi/<name>b-<id>` on kernels that truncate it.
pub const MAX_NAME_LEN: usize = 12;

/// Checks a test bed name: 1 to 12 ASCII letters or digits.
pub(crate) fn validate_name(name: &str) -> Result<(), TestbedError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_NAME_LEN {
        "too long"
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        "contains a character that is not an ASCII letter or digit"
    } else {
        return Ok(());
    };
    Err(TestbedError::InvalidName { name: name.to_owned(), reason })
}
