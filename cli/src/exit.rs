//! How `oncekey` ends: the exit code and the one-line message of a failed command, and of a
//! command line clap refused.
//!
//! 0 success, 1 runtime failure, 64 (sysexits' EX_USAGE) bad configuration, 65 (EX_DATAERR) the
//! embedded store's data is damaged or missing, 69 (EX_UNAVAILABLE) the CQL cluster did not become
//! available before `--cql-startup-timeout`.

use oncekey_server::serve::ServeError;
use oncekey_server::settings::{ConfigError, UnavailableError};
use oncekey_server::store::embedded::IntegrityError;
use std::process::ExitCode;

/// Bad configuration: the message names the flag.
const EXIT_CONFIG: u8 = 64;
/// sysexits' EX_DATAERR: the data on disk, not the configuration, is wrong.
const EXIT_DATA: u8 = 65;
/// sysexits' EX_UNAVAILABLE: a service needed (the CQL cluster) did not answer in time.
const EXIT_UNAVAILABLE: u8 = 69;

/// Prints why a command failed and returns its exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    if let Some(serve) = e.downcast_ref::<ServeError>() {
        let code = match serve {
            ServeError::Config(_) => EXIT_CONFIG,
            ServeError::Unavailable(_) => EXIT_UNAVAILABLE,
            ServeError::Integrity(_) => EXIT_DATA,
            _ => 1,
        };
        eprintln!("error: {e:#}");
        return ExitCode::from(code);
    }
    if let Some(config) = e.downcast_ref::<ConfigError>() {
        eprintln!("error: {config}");
        return ExitCode::from(EXIT_CONFIG);
    }
    if let Some(unavailable) = e.downcast_ref::<UnavailableError>() {
        eprintln!("error: {unavailable}");
        return ExitCode::from(EXIT_UNAVAILABLE);
    }
    if let Some(refusal) = e.downcast_ref::<IntegrityError>() {
        eprintln!("error: {refusal}");
        return ExitCode::from(EXIT_DATA);
    }
    match e.downcast_ref::<tonic::Status>() {
        Some(status) => eprintln!("error: {}", crate::client::describe(status)),
        None => eprintln!("error: {e:#}"),
    }
    ExitCode::FAILURE
}

/// A command line clap refused: help and version as clap shows them; a malformed value, a missing
/// or unknown flag is bad configuration: one line naming the flag, exit 64.
pub fn command_line_error(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let text = |kind| match e.get(kind) {
                Some(ContextValue::String(s)) => Some(s.as_str()),
                _ => None,
            };
            // "--listen <LISTEN>" → "--listen"
            let flag = text(ContextKind::InvalidArg)
                .and_then(|arg| arg.split_whitespace().next())
                .unwrap_or("a flag");
            let value = text(ContextKind::InvalidValue).unwrap_or_default();
            let why = match (std::error::Error::source(e), e.get(ContextKind::ValidValue)) {
                (Some(source), _) => source.to_string(),
                (None, Some(ContextValue::Strings(valid))) if !valid.is_empty() => {
                    format!("expected one of {}", valid.join(", "))
                }
                _ if value.is_empty() => {
                    eprintln!("error: {flag} needs a value");
                    return ExitCode::from(EXIT_CONFIG);
                }
                _ => "not a valid value".to_owned(),
            };
            eprintln!("error: {flag}: invalid value {value:?}: {why}");
            ExitCode::from(EXIT_CONFIG)
        }
        _ => {
            // clap's message without its usage and tip lines, on one line.
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .take_while(|line| !line.starts_with("Usage:"))
                .filter(|line| !line.is_empty() && !line.starts_with("tip:"))
                .collect();
            eprintln!("{} (see --help)", message.join(" "));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}
