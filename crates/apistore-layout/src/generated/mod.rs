//! The tables generated from each kube minor's own sources by interop/layout (see
//! interop/layout/README.md). Do not edit; regenerating a minor rewrites this file.

mod kube_1_31;
mod kube_1_32;
mod kube_1_33;
mod kube_1_34;
mod kube_1_35;
mod kube_1_36;
mod kube_1_37;

pub(crate) use kube_1_31::KUBE_1_31;
pub(crate) use kube_1_32::KUBE_1_32;
pub(crate) use kube_1_33::KUBE_1_33;
pub(crate) use kube_1_34::KUBE_1_34;
pub(crate) use kube_1_35::KUBE_1_35;
pub(crate) use kube_1_36::KUBE_1_36;
pub(crate) use kube_1_37::KUBE_1_37;

use crate::table::Row;

/// The table of kube 1.<minor>, if one was generated.
pub(crate) const fn for_minor(minor: u32) -> Option<&'static [Row]> {
    match minor {
        31 => Some(KUBE_1_31),
        32 => Some(KUBE_1_32),
        33 => Some(KUBE_1_33),
        34 => Some(KUBE_1_34),
        35 => Some(KUBE_1_35),
        36 => Some(KUBE_1_36),
        37 => Some(KUBE_1_37),
        _ => None,
    }
}
