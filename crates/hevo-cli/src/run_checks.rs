//! What `hevo run` checks before any work (no run directory, no phase 0, no trial): the
//! seed folders, the provider keys its backends need, the suite (built first by `setup`
//! when it is missing), its `val` tasks and, with `--finalize`, the `test` tasks the search
//! will end on.

use std::path::Path;

use hevo_search::config::{ConfigError, RunConfig};

use crate::CliError;

/// Runs the checks (and `setup` when the suite is missing); `log` gets the setup line.
pub fn before_work(
    config: &RunConfig,
    config_file: &Path,
    finalize: bool,
    log: &mut dyn FnMut(&str),
) -> Result<(), CliError> {
    config.check_seeds(config_file).map_err(CliError::user)?;
    config.check_api_keys(config_file).map_err(CliError::user)?;
    let suite_dir = config.resolve(config_file, &config.suite);
    if !suite_dir.join("tasks.jsonl").exists() {
        if let Some(setup) = &config.setup {
            run_setup(setup, config_file, &suite_dir, log)?;
        }
    }
    config.check_suite(config_file).map_err(CliError::user)?;
    let suite = if finalize {
        hevo_search::finalize::test_suite(&suite_dir)
            .map_err(crate::finalize_cmd::finalize_error)?
    } else {
        hevo_runtime::suite::Suite::load(&suite_dir).map_err(CliError::user)?
    };
    hevo_search::run::val_split(&suite, &suite_dir).map_err(CliError::user)?;
    Ok(())
}

/// Runs `setup` in the config's folder, to build the missing suite.
fn run_setup(
    setup: &[String],
    config_file: &Path,
    suite_dir: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<(), CliError> {
    log(&format!(
        "suite `{}` is missing: running setup `{}`",
        suite_dir.display(),
        setup.join(" ")
    ));
    let status = std::process::Command::new(&setup[0])
        .args(&setup[1..])
        .current_dir(config_file.parent().unwrap_or(Path::new(".")))
        .status()
        .map_err(|e| CliError::user(format!("cannot run setup `{}`: {e}", setup.join(" "))))?;
    if !status.success() {
        return Err(CliError::user(ConfigError::invalid_at_line(
            config_file,
            "setup",
            format!(
                "`{}` failed ({status}) and the suite `{}` is still missing: fix the \
                 command (its output is above), or build the suite yourself",
                setup.join(" "),
                suite_dir.display()
            ),
        )));
    }
    Ok(())
}
