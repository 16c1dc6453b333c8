//! The text of migration files: statements split out of a file, the column an `ALTER TABLE …
//! ADD` statement adds, the checksum recorded for an applied file. Pure: no I/O.

use sha2::{Digest, Sha256};

/// The (table, column) of a one-column `ALTER TABLE table ADD column type` statement, lower
/// case as CQL stores unquoted names.
pub fn added_column(statement: &str) -> Option<(String, String)> {
    let words: Vec<String> = statement
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    match words.as_slice() {
        [alter, table_kw, table, add, column, _type]
            if alter == "alter" && table_kw == "table" && add == "add" =>
        {
            Some((table.clone(), column.clone()))
        }
        _ => None,
    }
}

/// The statements of a CQL file: `--` comment lines dropped, split on `;`.
pub fn split_statements(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    code.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The hex SHA-256 of a migration's text.
pub fn checksum(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The first line of a statement (what an error names).
pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
