//! `--cql-replication`: the keyspace replication `oncekey migrate` creates, parsed into the CQL
//! map literal. Validation only; nothing here talks to a cluster.

/// Keyspace replication from `--cql-replication`: `SimpleStrategy:<rf>` (local use only),
/// `NetworkTopologyStrategy:<rf>` or `NetworkTopologyStrategy:<dc>=<rf>,<dc>=<rf>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication(String);

impl Replication {
    /// The CQL map literal, e.g. `{'class': 'SimpleStrategy', 'replication_factor': 1}`.
    pub fn cql(&self) -> &str {
        &self.0
    }
}

/// Parses `--cql-replication`.
pub fn parse_replication(text: &str) -> Result<Replication, String> {
    let usage = "use SimpleStrategy:<rf> (local use only) or NetworkTopologyStrategy:<dc>=<rf>[,<dc>=<rf>…]";
    let (class, spec) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: {usage}"))?;
    let factor = |rf: &str| match rf.trim().parse::<u16>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{text:?}: replication factor {rf:?} is not a number ≥ 1"
        )),
    };
    let entries = match class.trim() {
        "SimpleStrategy" => vec![("replication_factor".to_owned(), factor(spec)?)],
        "NetworkTopologyStrategy" if !spec.contains('=') => {
            vec![("replication_factor".to_owned(), factor(spec)?)]
        }
        "NetworkTopologyStrategy" => spec
            .split(',')
            .map(|pair| {
                let (dc, rf) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("{text:?}: {usage}"))?;
                let dc = dc.trim();
                let valid = !dc.is_empty()
                    && dc
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
                if !valid {
                    return Err(format!("{text:?}: bad datacenter name {dc:?}"));
                }
                Ok((dc.to_owned(), factor(rf)?))
            })
            .collect::<Result<_, _>>()?,
        other => return Err(format!("{text:?}: unknown strategy {other:?}; {usage}")),
    };
    let mut cql = format!("{{'class': '{}'", class.trim());
    for (key, rf) in entries {
        cql.push_str(&format!(", '{key}': {rf}"));
    }
    cql.push('}');
    Ok(Replication(cql))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_flags() {
        assert_eq!(
            parse_replication("SimpleStrategy:1").unwrap().cql(),
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        );
        assert_eq!(
            parse_replication("NetworkTopologyStrategy:dc1=3,dc2=3")
                .unwrap()
                .cql(),
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}"
        );
        assert_eq!(
            parse_replication("NetworkTopologyStrategy:3")
                .unwrap()
                .cql(),
            "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}"
        );
        for bad in [
            "SimpleStrategy",
            "SimpleStrategy:0",
            "SimpleStrategy:x",
            "LocalStrategy:1",
            "NetworkTopologyStrategy:dc'1=3",
            "NetworkTopologyStrategy:dc1=3,dc2",
        ] {
            assert!(parse_replication(bad).is_err(), "{bad}");
        }
    }
}
