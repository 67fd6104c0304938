//! IFT Adaption Indications in words: the one-line summary
//! ([`Indication`]'s `Display`) and every field on one line
//! ([`Indication::tree`]), in the style of smoltcp's `wire::pretty_print`.
//! `iwarp decode` prints them, and the stack's tracing can log a
//! negotiation the same way.

use core::fmt;

use super::indication::{Indication, Phase};

fn phase(p: Phase) -> u8 {
    match p {
        Phase::Zero => 0,
        Phase::One => 1,
    }
}

impl fmt::Display for Indication {
    /// `Adaption Indication phase 0, RDMA mode, HC 1 PC 1, VTag 0x1111`,
    /// and the marker interval the sender wants, if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Adaption Indication phase {}, {} mode, HC {} PC {}, VTag {:#06x}",
            phase(self.phase),
            if self.rdma { "RDMA" } else { "DDP" },
            u8::from(self.header_crc),
            u8::from(self.payload_crc),
            self.vtag
        )?;
        if let Some(m) = self.receive_markers {
            write!(f, ", markers every {} wanted", m.get())?;
        }
        Ok(())
    }
}

/// Every field of an indication on one line: see [`Indication::tree`].
#[derive(Debug, Clone, Copy)]
pub struct IndicationTree<'a>(&'a Indication);

impl Indication {
    /// Every field: `version 1, phase 0, R 1 HC 1 PC 1 IH 0 IP 0 SP 0 SM 0
    /// RM 0, VTag 0x1111`.
    pub fn tree(&self) -> IndicationTree<'_> {
        IndicationTree(self)
    }
}

impl fmt::Display for IndicationTree<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.0;
        let b = u8::from;
        write!(
            f,
            "version {}, phase {}, R {} HC {} PC {} IH {} IP {} SP {} SM {} RM ",
            i.version,
            phase(i.phase),
            b(i.rdma),
            b(i.header_crc),
            b(i.payload_crc),
            b(i.ignore_header_crc),
            b(i.ignore_payload_crc),
            b(i.speculative_placement),
            b(i.send_markers)
        )?;
        match i.receive_markers {
            Some(m) => write!(f, "1 (every {})", m.get())?,
            None => f.write_str("0")?,
        }
        write!(f, ", VTag {:#06x}", i.vtag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ift::IftConfig;

    #[test]
    fn summary_and_tree() {
        let i = IftConfig::new(0x1111).indication(Phase::Zero);
        assert!(i
            .to_string()
            .starts_with("Adaption Indication phase 0, RDMA mode, HC "));
        assert!(i.to_string().contains("VTag 0x1111"));
        assert!(i.tree().to_string().starts_with("version 1, phase 0, R 1 "));
    }
}
