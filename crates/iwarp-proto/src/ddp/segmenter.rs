//! Segmentation of a DDP message at the data source (RFC 5041 §5.2).

/// Cuts a message of `len` octets into segments no larger than the MULPDU.
///
/// Each call to [`Segmenter::next_segment`] gives the offset and length of
/// the next segment's payload (the MO of an untagged segment, the TO
/// increment of a tagged one) and whether it is the last. A zero-length
/// message is exactly one segment (§5.2). The MULPDU may change between
/// segments: it is read at each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segmenter {
    len: u64,
    sent: u64,
    done: bool,
}

/// One segment's share of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    /// Offset of its first payload octet in the message.
    pub offset: u64,
    /// Payload octets.
    pub len: usize,
    /// True for the last segment (L flag).
    pub last: bool,
}

impl Segmenter {
    /// A segmenter for a message of `len` octets.
    pub const fn new(len: u64) -> Self {
        Self {
            len,
            sent: 0,
            done: false,
        }
    }

    /// Octets handed out so far.
    pub const fn sent(&self) -> u64 {
        self.sent
    }

    /// True once the last segment was handed out.
    pub const fn is_done(&self) -> bool {
        self.done
    }

    /// The next segment, given the current MULPDU and the header length
    /// of this model (a segment is header plus payload, at most MULPDU).
    /// `None` once done. A MULPDU too small for any payload still makes
    /// progress by one octet, so a caller bug cannot loop forever.
    //= draft-ietf-rddp-mpa-01#3.2
    //# DDP SHOULD limit each record size to MULPDU.
    //= draft-ietf-rddp-mpa-01#5.3.2
    //# DDP SHOULD provide ULPDUs that are as large as possible, but less than or equal to
    //# MULPDU.
    //= rfc5041#5.2
    //# At the Data Source, the DDP layer MUST segment the data contained in a ULP message into
    //# a series of DDP Segments, where each DDP Segment contains a DDP Header and ULP Payload,
    //# and MUST be no larger than
    //= rfc5041#5.2
    //# At the Data Source, the DDP layer MUST send all the data contained in the ULP message.
    //= rfc5041#5.2
    //# A zero-length DDP Message is allowed and MUST consume exactly one DDP Segment.
    //= rfc5040#5
    //# Zero-length RDMA Write, RDMA Read and Send Messages are valid and MUST be supported.
    pub fn next_segment(&mut self, mulpdu: usize, header_len: usize) -> Option<SegmentSpan> {
        if self.done {
            return None;
        }
        let room = mulpdu.saturating_sub(header_len).max(1) as u64;
        let len = (self.len - self.sent).min(room);
        let span = SegmentSpan {
            offset: self.sent,
            len: len as usize,
            last: self.sent + len == self.len,
        };
        self.sent += len;
        self.done = span.last;
        Some(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    //= draft-ietf-rddp-mpa-01#3.2
    //= type=test
    //# DDP SHOULD limit each record size to MULPDU.
    //= draft-ietf-rddp-mpa-01#5.3.2
    //= type=test
    //# DDP SHOULD provide ULPDUs that are as large as possible, but less than or equal to
    //# MULPDU.
    //= rfc5041#5.2
    //= type=test
    //# At the Data Source, the DDP layer MUST segment the data contained in a ULP message into
    //# a series of DDP Segments, where each DDP Segment contains a DDP Header and ULP Payload,
    //# and MUST be no larger than
    fn rfc_examples() {
        // RFC 5041 §5.2: 2048 octets untagged, MULPDU 1500: 1482 + 566.
        let mut s = Segmenter::new(2048);
        assert_eq!(
            s.next_segment(1500, 18),
            Some(SegmentSpan {
                offset: 0,
                len: 1482,
                last: false
            })
        );
        assert_eq!(
            s.next_segment(1500, 18),
            Some(SegmentSpan {
                offset: 1482,
                len: 566,
                last: true
            })
        );
        assert_eq!(s.next_segment(1500, 18), None);
        // Tagged: 1486 + 562.
        let mut s = Segmenter::new(2048);
        assert_eq!(s.next_segment(1500, 14).unwrap().len, 1486);
        assert_eq!(s.next_segment(1500, 14).unwrap().len, 562);
    }

    #[test]
    //= rfc5041#5.2
    //= type=test
    //# A zero-length DDP Message is allowed and MUST consume exactly one DDP Segment.
    fn zero_length_is_one_segment() {
        let mut s = Segmenter::new(0);
        assert_eq!(
            s.next_segment(128, 18),
            Some(SegmentSpan {
                offset: 0,
                len: 0,
                last: true
            })
        );
        assert_eq!(s.next_segment(128, 18), None);
    }

    #[test]
    fn exact_multiple_ends_with_a_full_last_segment() {
        let mut s = Segmenter::new(220);
        assert!(!s.next_segment(128, 18).unwrap().last);
        let l = s.next_segment(128, 18).unwrap();
        assert_eq!((l.len, l.last), (110, true));
        assert!(s.is_done());
    }
}
