//! An outcome stored apart from its record, decoded without its result body and error details
//! (a listing shows neither): those fields are skipped, not copied, so listing records whose
//! results are up to a MiB costs what their small fields cost.

use super::{StoredError, StoredOutcome, StoredResult};
use prost::encoding::{skip_field, DecodeContext, WireType};
use prost::Message;

/// `StoredResult`'s body field.
const BODY_TAG: u32 = 2;
/// `StoredError`'s details field.
const DETAILS_TAG: u32 = 3;

/// Decodes a `StoredOutcome`, leaving the result body and the error details empty.
pub(super) fn decode(bytes: &[u8]) -> Result<StoredOutcome, prost::DecodeError> {
    let summary = Summary::decode(bytes)?;
    Ok(StoredOutcome {
        result: summary.result.map(|r| r.0),
        error: summary.error.map(|e| e.0),
    })
}

#[derive(Message)]
struct Summary {
    #[prost(message, optional, tag = "1")]
    result: Option<Skipping<StoredResult, BODY_TAG>>,
    #[prost(message, optional, tag = "2")]
    error: Option<Skipping<StoredError, DETAILS_TAG>>,
}

/// A message decoded without its field `TAG`.
#[derive(Debug, Default)]
struct Skipping<M, const TAG: u32>(M);

impl<M: Message + Default, const TAG: u32> Message for Skipping<M, TAG> {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.0.encode_raw(buf)
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            t if t == TAG => skip_field(wire_type, tag, buf, ctx),
            _ => self.0.merge_field(tag, wire_type, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }

    fn clear(&mut self) {
        self.0.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_and_details_are_left_out_and_the_rest_kept() {
        let outcome = StoredOutcome {
            result: Some(StoredResult {
                code: 201,
                body: vec![7; 1 << 20],
                content_type: "application/json".into(),
                metadata: [("k".to_owned(), "v".to_owned())].into(),
            }),
            error: Some(StoredError {
                code: 9,
                message: "m".into(),
                details: vec![1; 64 << 10],
            }),
        };
        let summary = decode(&outcome.encode_to_vec()).unwrap();
        let mut expected = outcome;
        expected.result.as_mut().unwrap().body.clear();
        expected.error.as_mut().unwrap().details.clear();
        assert_eq!(summary, expected);
        assert!(decode(b"\xff\xff").is_err());
    }
}
