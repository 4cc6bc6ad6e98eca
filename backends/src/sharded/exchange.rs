//! The all-to-all exchange of a sharded table's device-data calls: every source device's send buffer holds its
//! slice's words laid out by destination shard, and every destination receives its words from each source in
//! source order ([`Plan`]). Two transports move them: NCCL's grouped `ncclSend` / `ncclRecv` between the GPUs
//! (`sharded::nccl`, CUDA with one shard per distinct device), and the host's memory (any runtime, shards
//! sharing a device included: each send buffer read back and each receive buffer written, the exchange the tests
//! on lavapipe run). The answers of a find return by the reverse exchange ([`Plan::reversed`]), which puts them
//! back in send-buffer order.

use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use cubecl::stream_id::StreamId;
use hashtile_core::Result;

/// Who sends how many words to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// `counts[from][to]`: words source `from` sends to destination `to`.
    counts: Vec<Vec<usize>>,
}

impl Plan {
    /// The plan of `counts[from][to]` (square).
    pub fn new(counts: Vec<Vec<usize>>) -> Self {
        debug_assert!(counts.iter().all(|c| c.len() == counts.len()));
        Self { counts }
    }

    /// Sources (= destinations).
    pub fn shards(&self) -> usize {
        self.counts.len()
    }

    /// Words `from` sends to `to`.
    pub fn count(&self, from: usize, to: usize) -> usize {
        self.counts[from][to]
    }

    /// Where `from`'s words for `to` start in its send buffer (destinations in order).
    pub fn send_start(&self, from: usize, to: usize) -> usize {
        self.counts[from][..to].iter().sum()
    }

    /// Where `from`'s words start in `to`'s receive buffer (sources in order).
    pub fn recv_start(&self, to: usize, from: usize) -> usize {
        self.counts[..from].iter().map(|c| c[to]).sum()
    }

    /// Words `from` sends in all.
    pub fn send_len(&self, from: usize) -> usize {
        self.counts[from].iter().sum()
    }

    /// Words `to` receives in all.
    pub fn recv_len(&self, to: usize) -> usize {
        self.counts.iter().map(|c| c[to]).sum()
    }

    /// The way back: every destination returns to each source as many words as it received from it, and they
    /// land where the source's send buffer held them.
    pub fn reversed(&self) -> Self {
        let n = self.shards();
        Self::new(
            (0..n)
                .map(|from| (0..n).map(|to| self.counts[to][from]).collect())
                .collect(),
        )
    }
}

/// One shard's end of an exchange: its device's client and the stream its buffers were written on.
pub(crate) struct End<'a, R: Runtime> {
    pub client: &'a ComputeClient<R>,
    pub stream: StreamId,
}

/// Moves `send[from]` (`plan.send_len(from)` words of `word_bytes`, laid out by destination) to new receive
/// buffers through the host's memory: each destination's buffer holds `plan.recv_len(to)` words, sources in
/// order. Each buffer is read and written on its shard's stream.
pub(crate) fn through_host<R: HostTransfer>(
    ends: &[End<'_, R>],
    plan: &Plan,
    word_bytes: usize,
    send: &[Handle],
) -> Result<Vec<Handle>> {
    let n = plan.shards();
    let sent: Vec<Vec<u8>> = (0..n)
        .map(|from| {
            if plan.send_len(from) == 0 {
                return Vec::new();
            }
            let e = &ends[from];
            e.stream
                .executes(|| e.client.read_one_unchecked(send[from].clone()).to_vec())
        })
        .collect();
    Ok((0..n)
        .map(|to| {
            let mut bytes = Vec::with_capacity(plan.recv_len(to) * word_bytes);
            for (from, s) in sent.iter().enumerate() {
                let start = plan.send_start(from, to) * word_bytes;
                bytes.extend_from_slice(&s[start..start + plan.count(from, to) * word_bytes]);
            }
            if bytes.is_empty() {
                // Buffers of no words still bind: one word.
                bytes.resize(word_bytes, 0);
            }
            let e = &ends[to];
            e.stream.executes(|| e.client.create_from_slice(&bytes))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_lens_and_the_way_back() {
        let p = Plan::new(vec![vec![1, 2, 0], vec![3, 0, 4], vec![0, 5, 6]]);
        assert_eq!(p.send_start(1, 2), 3);
        assert_eq!(p.recv_start(2, 2), 4);
        assert_eq!(p.recv_len(1), 7);
        assert_eq!(p.send_len(2), 11);
        let r = p.reversed();
        assert_eq!(r.count(2, 1), 4);
        assert_eq!(r.reversed(), p);
        // What `to` received from `from` starts, on the way back, where `to`'s send buffer meets `from`.
        for from in 0..3 {
            for to in 0..3 {
                assert_eq!(p.recv_start(to, from), r.send_start(to, from));
                assert_eq!(p.send_start(from, to), r.recv_start(from, to));
            }
        }
    }
}
