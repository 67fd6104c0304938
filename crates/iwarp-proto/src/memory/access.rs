//! Access rights of a registered region.

bitflags::bitflags! {
    /// What a registered region may be used for (RFC 5041 §8.3.1 item 5).
    ///
    /// Local reads (the source of a Send or RDMA Write) need no right: a
    /// consumer may always read memory it registered.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Access: u8 {
        /// The local engine may write into it: receive buffers and the
        /// sink of an RDMA Read.
        const LOCAL_WRITE = 0x01;
        /// A remote peer may read it with RDMA Read.
        const REMOTE_READ = 0x02;
        /// A remote peer may write it with RDMA Write; on iWARP also
        /// needed by the sink of a local RDMA Read, since the Read
        /// Response is a tagged write into it.
        const REMOTE_WRITE = 0x04;
    }
}
