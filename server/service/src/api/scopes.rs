//! Which scope each RPC needs, and the tower layer that refuses a caller without it.
//!
//! Between the authenticating interceptor (which puts the caller's `Principal` in the request's
//! extensions) and admission: a request whose token lacks every scope its RPC accepts is answered
//! PERMISSION_DENIED `MISSING_SCOPE`, naming the scope, before it is admitted or decoded. A path
//! not in the table (an RPC this server does not have) passes, and the server answers
//! UNIMPLEMENTED; a unit test checks that every RPC of the service is in the table.

use super::auth::{Principal, Scope};
use super::error::ApiError;
use super::guard::Guard;

/// The scopes each RPC accepts (any one of them suffices), by request path.
pub const TABLE: &[(&str, &[Scope])] = &[
    ("/oncekey.v1.Ledger/Claim", &[Scope::Ledger]),
    ("/oncekey.v1.Ledger/Complete", &[Scope::Ledger]),
    ("/oncekey.v1.Ledger/Fail", &[Scope::Ledger]),
    ("/oncekey.v1.Ledger/Renew", &[Scope::Ledger]),
    ("/oncekey.v1.Ledger/KeepAlive", &[Scope::Ledger]),
    (
        "/oncekey.v1.Ledger/Lookup",
        &[Scope::Ledger, Scope::Approve, Scope::Admin],
    ),
    (
        "/oncekey.v1.Ledger/ListRecords",
        &[Scope::Ledger, Scope::Approve, Scope::Admin],
    ),
    (
        "/oncekey.v1.Ledger/ListDuplicateIntents",
        &[Scope::Ledger, Scope::Approve, Scope::Admin],
    ),
    ("/oncekey.v1.Ledger/Approve", &[Scope::Approve]),
    ("/oncekey.v1.Ledger/Reject", &[Scope::Approve]),
    ("/oncekey.v1.Ledger/Purge", &[Scope::Admin]),
    ("/oncekey.v1.Ledger/Rekey", &[Scope::Admin]),
    ("/oncekey.v1.Ledger/EraseTenant", &[Scope::Admin]),
];

/// The scopes `path` accepts; `None` for a path not in the table.
pub fn accepted(path: &str) -> Option<&'static [Scope]> {
    TABLE.iter().find(|(p, _)| *p == path).map(|(_, s)| *s)
}

/// Whether `principal` may call `path`; the error names the (first) scope it lacks.
pub fn check(principal: &Principal, path: &str) -> Result<(), ApiError> {
    match accepted(path) {
        Some(scopes) if !scopes.iter().any(|s| principal.scopes.contains(*s)) => {
            let rpc = path.rsplit('/').next().unwrap_or(path);
            Err(ApiError::MissingScope {
                scope: scopes[0].name(),
                rpc: rpc.to_owned(),
            })
        }
        _ => Ok(()),
    }
}

/// The scope check as a [`Guard`] in front of the Ledger service.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScopeGuard;

impl Guard for ScopeGuard {
    type Permit = ();

    fn check<B>(&self, request: &http::Request<B>) -> Result<(), ApiError> {
        // The interceptor in front put the caller's principal here (or refused the request).
        match request.extensions().get::<Principal>() {
            Some(principal) => check(principal, request.uri().path()),
            None => Ok(()),
        }
    }

    fn respond(
        _: (),
        response: http::Response<tonic::body::Body>,
    ) -> http::Response<tonic::body::Body> {
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::Scopes;
    use prost::Message;

    fn with(scopes: &[Scope]) -> Principal {
        Principal {
            label: "t".into(),
            scopes: scopes.iter().copied().collect(),
        }
    }

    #[test]
    fn every_rpc_of_the_service_is_in_the_table() {
        let set = prost_types::FileDescriptorSet::decode(oncekey_api::FILE_DESCRIPTOR_SET).unwrap();
        let mut seen = 0;
        for file in set.file.iter().filter(|f| f.package() == "oncekey.v1") {
            for service in &file.service {
                for method in &service.method {
                    let path = format!("/oncekey.v1.{}/{}", service.name(), method.name());
                    assert!(accepted(&path).is_some(), "{path} has no scopes");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 9, "{seen}");
    }

    #[test]
    fn each_scope_opens_its_rpcs_and_only_those() {
        let ledger = with(&[Scope::Ledger]);
        let approve = with(&[Scope::Approve]);
        let admin = with(&[Scope::Admin]);
        for rpc in ["Claim", "Complete", "Fail", "Renew", "KeepAlive"] {
            let path = format!("/oncekey.v1.Ledger/{rpc}");
            assert!(check(&ledger, &path).is_ok());
            for other in [&approve, &admin] {
                assert!(matches!(
                    check(other, &path),
                    Err(ApiError::MissingScope {
                        scope: "ledger",
                        ..
                    })
                ));
            }
        }
        for rpc in ["Lookup", "ListRecords"] {
            let path = format!("/oncekey.v1.Ledger/{rpc}");
            for any in [&ledger, &approve, &admin] {
                assert!(check(any, &path).is_ok(), "{rpc}");
            }
        }
        for (rpc, scope, holder) in [
            ("Approve", "approve", &approve),
            ("Reject", "approve", &approve),
            ("Purge", "admin", &admin),
        ] {
            let path = format!("/oncekey.v1.Ledger/{rpc}");
            assert!(check(holder, &path).is_ok());
            assert!(check(&with(&Scope::ALL), &path).is_ok());
            match check(&ledger, &path) {
                Err(ApiError::MissingScope {
                    scope: named,
                    rpc: r,
                }) => {
                    assert_eq!((named, r.as_str()), (scope, rpc))
                }
                other => panic!("{rpc}: {other:?}"),
            }
        }
        assert!(check(&with(&[]), "/oncekey.v1.Ledger/Nope").is_ok());
        assert_eq!(Scopes::LEDGER, [Scope::Ledger].into_iter().collect());
    }
}
