//! Who sends how many words to whom in an all-to-all exchange step ([`Plan`]), and where each part lies in the
//! send and receive regions: the bookkeeping every transport (`sharded::exchange`, `sharded::nccl`) shares.

/// Who sends how many words to whom: each source's region holds its words for each destination in turn, and
/// each destination's region its words from each source in turn.
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

    /// Where `from`'s words for `to` start in its send region (destinations in order).
    pub fn send_start(&self, from: usize, to: usize) -> usize {
        self.counts[from][..to].iter().sum()
    }

    /// Where `from`'s words start in `to`'s receive region (sources in order).
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

    /// Words moved in all.
    pub fn words(&self) -> usize {
        self.counts.iter().flatten().sum()
    }

    /// The way back: every destination returns to each source as many words as it received from it, and they
    /// land where the source's send region held them.
    pub fn reversed(&self) -> Self {
        let n = self.shards();
        Self::new(
            (0..n)
                .map(|from| (0..n).map(|to| self.counts[to][from]).collect())
                .collect(),
        )
    }
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
        assert_eq!(p.words(), 21);
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
