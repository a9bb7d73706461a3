// The module root of the cross-check; it is run with -modfile=go-1.37.mod (see
// ../README.md). This file is never read by those runs.
module apistore/interop/layout/crosscheck

go 1.26.0
