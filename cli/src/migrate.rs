//! `oncekey migrate`: runs the CQL store's migrations (`oncekey_server::store::cql::migrate`) and
//! prints one line per migration.

use oncekey_server::settings::ConfigError;
use oncekey_server::store::cql::migrate::{self, MigrateConfig};
use oncekey_server::telemetry::{self, LogFormat};

/// Applies every migration; a wrong flag or setup is a `ConfigError` (exit 64).
pub async fn run(config: MigrateConfig) -> anyhow::Result<()> {
    let _ = telemetry::init(LogFormat::Text, None);
    match migrate::run(&config).await {
        Ok(outcomes) => {
            for o in outcomes {
                let what = if o.applied_now {
                    "applied"
                } else {
                    "already applied"
                };
                println!("{} {what}", o.name);
            }
            println!("keyspace {} is up to date", config.cql.keyspace);
            Ok(())
        }
        Err(e) if e.is_config() => Err(ConfigError(e.to_string()).into()),
        Err(e) => Err(e.into()),
    }
}
