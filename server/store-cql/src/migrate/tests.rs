//! Unit tests of `migrate` (the parent module).

use super::*;

#[test]
fn embedded_migrations_match_the_folder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cql"))
        .collect();
    files.sort();
    let embedded: Vec<String> = MIGRATIONS
        .iter()
        .map(|m| format!("{}.cql", m.name))
        .collect();
    assert_eq!(
        files, embedded,
        "register every migrations/*.cql in MIGRATIONS, in order"
    );
    // Numbers only grow (a gap is a migration another branch adds).
    for pair in MIGRATIONS.windows(2) {
        assert!(pair[0].version < pair[1].version, "{pair:?}");
    }
    for m in MIGRATIONS {
        assert!(m.name.starts_with(&format!("{:04}_", m.version)));
        let on_disk = std::fs::read_to_string(dir.join(format!("{}.cql", m.name))).unwrap();
        assert_eq!(on_disk, m.text);
    }
}

#[test]
fn statements_split_without_comments() {
    let parts = split_statements(
        "-- a; comment\nCREATE TABLE a (x int);\n\n-- b\nCREATE TABLE b (y int);\n",
    );
    assert_eq!(parts, ["CREATE TABLE a (x int)", "CREATE TABLE b (y int)"]);
    assert_eq!(split_statements(MIGRATIONS[0].text).len(), 1);
}

#[test]
fn every_statement_of_a_migration_can_run_again() {
    // A CREATE must say IF NOT EXISTS; an ALTER must add one column (skipped when present).
    for m in MIGRATIONS {
        for statement in split_statements(m.text) {
            let upper = statement.to_ascii_uppercase();
            let ok = (upper.starts_with("CREATE ") && upper.contains(" IF NOT EXISTS "))
                || added_column(&statement).is_some();
            assert!(ok, "{}: cannot run twice: {statement}", m.name);
        }
    }
    assert_eq!(
        added_column("ALTER TABLE records ADD max_attempts bigint"),
        Some(("records".into(), "max_attempts".into()))
    );
    assert_eq!(added_column("ALTER TABLE records ADD (a int, b int)"), None);
    assert_eq!(added_column("ALTER TABLE records DROP a"), None);
}

#[test]
fn the_codec_writes_only_columns_the_migrations_create() {
    let text: String = MIGRATIONS.iter().map(|m| m.text).collect();
    for column in super::super::codec::COLUMNS {
        let declared = text.lines().map(str::trim).any(|l| {
            l.starts_with(&format!("{column} "))
                || added_column(l).is_some_and(|(_, added)| added == column)
        });
        assert!(declared, "column {column} is not created by any migration");
    }
}
