//! The shadow git history (layer ②): checkpoints as commits of a bare git repository of
//! Rewind's own, brought up to date on demand.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{ApiError, Service};

/// Bring the shadow history up to date with the op log and say where its git directory is.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShadowPathRequest {
    /// Delete the shadow repository and write it again from the op log (reclaims the space of
    /// collected checkpoints; collected checkpoints are then absent from it).
    #[serde(default)]
    pub rebuild: bool,
}

/// The git directory (`git --git-dir PATH log -p SESSION`), each session's branch and what
/// this call wrote.
pub type ShadowPathResponse = rewind_core::ShadowReport;

impl Service {
    /// The `shadow-path` operation: see [`ShadowPathRequest`].
    pub fn shadow_path(&self, req: &ShadowPathRequest) -> Result<ShadowPathResponse, ApiError> {
        Ok(self.ws()?.shadow_sync(req.rebuild)?)
    }
}
