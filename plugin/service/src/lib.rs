//! The sidecar service.
