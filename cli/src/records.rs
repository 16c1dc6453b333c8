//! `oncekey records list`: the records of the caller's tenant, filtered like ListRecords, as a
//! readable table (default) or one JSON document (`--json`). It follows every page, unless
//! `--page-size` or `--page-token` asks for one page (then it says how to get the next).

use crate::client::{describe_status, record_json, ConnArgs};
use crate::render::text;
use clap::{Args, Subcommand};
use oncekey_api::v1;
use serde_json::json;

/// `oncekey records …`
#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// List your tenant's records: a table, or JSON with --json.
    List(ListCmd),
}

/// `oncekey records list`
#[derive(Debug, Clone, Args)]
pub struct ListCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Only records of this namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Only records with this status, as Lookup reports it (repeatable): PROCESSING, SUCCEEDED,
    /// FAILED, RETRY, UNKNOWN, … in any case.
    #[arg(long = "status", value_name = "STATUS", value_parser = parse_status)]
    statuses: Vec<i32>,
    /// Only records whose first Claim named this parent, as NAMESPACE/KEY.
    #[arg(long, value_name = "NAMESPACE/KEY")]
    parent: Option<String>,
    /// One JSON document ({"records": […], "next_page_token": …}) instead of a table.
    #[arg(long)]
    json: bool,
    /// Print one page of this many records (1..=1000) instead of following every page.
    #[arg(long)]
    page_size: Option<u32>,
    /// Print the page this token (a next_page_token) starts, with the same filters.
    #[arg(long)]
    page_token: Option<String>,
}

/// The wire names of every record status, without their prefix.
fn status_names() -> Vec<&'static str> {
    (1..64)
        .map_while(|n| v1::RecordStatus::try_from(n).ok())
        .map(|s| s.as_str_name().trim_start_matches("RECORD_STATUS_"))
        .collect()
}

/// A status name as on the wire, without its prefix, in any case.
fn parse_status(text: &str) -> Result<i32, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.trim_start_matches("RECORD_STATUS_");
    match v1::RecordStatus::from_str_name(&format!("RECORD_STATUS_{name}")) {
        Some(status) if status != v1::RecordStatus::Unspecified => Ok(status as i32),
        _ => Err(format!("expected one of {}", status_names().join(", "))),
    }
}

impl ListCmd {
    fn request(&self, page_token: String) -> anyhow::Result<v1::ListRecordsRequest> {
        let parent = match &self.parent {
            Some(p) => {
                let (namespace, key) = p
                    .split_once('/')
                    .ok_or_else(|| anyhow::anyhow!("--parent must be NAMESPACE/KEY"))?;
                Some(v1::OperationRef {
                    namespace: namespace.into(),
                    key: key.into(),
                })
            }
            None => None,
        };
        Ok(v1::ListRecordsRequest {
            namespace: self.namespace.clone().unwrap_or_default(),
            statuses: self.statuses.clone(),
            parent,
            page_size: self.page_size.unwrap_or(0),
            page_token,
        })
    }
}

/// Runs `oncekey records list`; returns what to print.
pub async fn list(cmd: ListCmd) -> anyhow::Result<String> {
    let mut rpc = crate::client::connect(&cmd.conn).await?;
    let one_page = cmd.page_size.is_some() || cmd.page_token.is_some();
    let mut token = cmd.page_token.clone().unwrap_or_default();
    let mut records = Vec::new();
    let next = loop {
        let page = rpc.list_records(cmd.request(token)?).await?.into_inner();
        records.extend(page.records);
        if one_page || page.next_page_token.is_empty() {
            break page.next_page_token;
        }
        token = page.next_page_token;
    };
    Ok(match cmd.json {
        true => {
            let doc = json!({
                "records": records.iter().map(record_json).collect::<Vec<_>>(),
                "next_page_token": next,
            });
            format!("{}\n", crate::render::json_text(&doc)?)
        }
        false => {
            let mut out = table(&records);
            if !next.is_empty() {
                out.push_str(&format!("next page: --page-token {}\n", text(&next)));
            }
            out
        }
    })
}

/// The records as an aligned table, one line each, and a count.
pub fn table(records: &[v1::Record]) -> String {
    const HEADER: [&str; 8] = [
        "NAMESPACE",
        "KEY",
        "STATUS",
        "SEMANTICS",
        "ATTEMPT",
        "TOKEN",
        "OWNER",
        "UPDATED",
    ];
    let rows: Vec<[String; 8]> = records
        .iter()
        .map(|r| {
            let json = record_json(r);
            let field = |name: &str| json[name].as_str().unwrap_or_default().to_owned();
            [
                text(&r.namespace).into_owned(),
                text(&r.key).into_owned(),
                describe_status(r.status),
                field("semantics"),
                r.attempt.to_string(),
                r.fencing_token.to_string(),
                text(&r.lease_owner).into_owned(),
                field("updated_at"),
            ]
        })
        .collect();
    let mut widths = HEADER.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&HEADER.map(String::from));
    for row in &rows {
        out.push_str(&line(row));
    }
    out.push_str(&match rows.len() {
        1 => "1 record\n".to_owned(),
        n => format!("{n} records\n"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_in_any_case_and_name_the_valid_ones() {
        assert_eq!(
            parse_status("unknown"),
            Ok(v1::RecordStatus::Unknown as i32)
        );
        assert_eq!(
            parse_status("Processing"),
            Ok(v1::RecordStatus::Processing as i32)
        );
        assert_eq!(
            parse_status("RECORD_STATUS_RETRY"),
            Ok(v1::RecordStatus::Retry as i32)
        );
        let err = parse_status("done").unwrap_err();
        assert!(
            err.contains("PROCESSING, SUCCEEDED, FAILED, RETRY, UNKNOWN"),
            "{err}"
        );
        assert!(parse_status("unspecified").is_err());
    }

    #[test]
    fn a_table_lines_up_its_columns() {
        let record = |key: &str, status: v1::RecordStatus| v1::Record {
            namespace: "payments.charge".into(),
            key: key.into(),
            status: status as i32,
            semantics: v1::Semantics::AtMostOnce as i32,
            fencing_token: 3,
            attempt: 2,
            lease_owner: "worker-7".into(),
            ..Default::default()
        };
        let out = table(&[
            record("order-1", v1::RecordStatus::Unknown),
            record("order-1000", v1::RecordStatus::Processing),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert!(
            lines[0].starts_with("NAMESPACE        KEY         STATUS"),
            "{out}"
        );
        assert!(
            lines[1].contains("order-1     UNKNOWN     AT_MOST_ONCE"),
            "{out}"
        );
        let status_at = lines[0].find("STATUS").unwrap();
        assert_eq!(&lines[2][status_at..status_at + 10], "PROCESSING");
        assert_eq!(lines[3], "2 records");
        assert_eq!(
            table(&[]),
            "NAMESPACE  KEY  STATUS  SEMANTICS  ATTEMPT  TOKEN  OWNER  UPDATED\n0 records\n"
        );
    }

    #[test]
    fn a_table_escapes_control_characters_in_stored_text() {
        let record = v1::Record {
            namespace: "payments.charge".into(),
            key: "order-1".into(),
            status: v1::RecordStatus::Processing as i32,
            lease_owner: "w\x1b[1A\x1b[2K\rpayments.charge  order-2  SUCCEEDED".into(),
            ..Default::default()
        };
        let out = table(&[record]);
        assert_eq!(out.lines().count(), 3, "{out}");
        assert!(
            !out.replace('\n', "").chars().any(char::is_control),
            "{out:?}"
        );
        assert!(out.contains("w\\u{1b}[1A\\u{1b}[2K\\u{d}payments"), "{out}");
    }
}
