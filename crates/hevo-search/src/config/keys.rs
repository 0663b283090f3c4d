//! The provider keys a `[model]` table names: each backend's key variable must be set
//! before a run starts, so a missing key is named by its line and fixed before a run
//! directory is made (it was found when the backends loaded, with no line).

use std::path::Path;

use super::{ConfigError, RunConfig};

impl RunConfig {
    /// Checks that every backend's API key variable ([`hevo_llm::BackendSpec::key_var`]) is
    /// set to something other than blanks in this environment.
    pub fn check_api_keys(&self, file: &Path) -> Result<(), ConfigError> {
        let Some(layer) = &self.model else {
            return Ok(());
        };
        for (i, backend) in layer.backends.iter().enumerate() {
            let Some(var) = backend.key_var() else {
                continue;
            };
            if hevo_llm::provider_keys::var(var).is_some_and(|v| !v.trim().is_empty()) {
                continue;
            }
            let named = if backend.api_key_env.is_some() {
                format!("model.backends.{i}.api_key_env")
            } else {
                format!("model.backends.{i}")
            };
            return Err(ConfigError::invalid_at_line(
                file,
                &named,
                format!(
                    "(backend `{}`) needs its API key in the environment variable `{var}`, which \
                     is not set or empty: export {var}=<your key> and run again (hevo gives it \
                     to this backend only, never to harness code; docs/models.md)",
                    backend.name
                ),
            ));
        }
        Ok(())
    }
}
