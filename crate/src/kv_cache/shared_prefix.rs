//! Which rows begin with another row's positions. `copy_row` is how one prefill fans out into
//! many samples; remembering that lets attention read the common prompt once for all of them
//! (each row still holds its own copy, so forgetting a share is always safe).

/// Positions `0..len` of a row hold the same K/V as those of row `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedPrefix {
    pub source: usize,
    pub len: usize,
}

pub(super) struct SharedPrefixes {
    of_row: Vec<Option<SharedPrefix>>,
    /// Per row, at least the longest prefix other rows share from it: lets `changed` skip its
    /// scan on the common path (appending past every share).
    lent: Vec<usize>,
}

impl SharedPrefixes {
    pub fn new(batch: usize) -> Self {
        Self { of_row: vec![None; batch], lent: vec![0; batch] }
    }

    pub fn get(&self, row: usize) -> Option<SharedPrefix> {
        self.of_row[row]
    }

    /// Row `dst` now holds a copy of row `src`, which is `len` positions long. A copy of a copy
    /// shares with the original, so every sample of one prompt points at the same row.
    pub fn copied(&mut self, src: usize, dst: usize, len: usize) {
        // Clears any share from dst first, so src can no longer point at dst below.
        self.changed(dst, 0);
        let share = self.of_row[src].unwrap_or(SharedPrefix { source: src, len });
        if share.len > 0 {
            self.of_row[dst] = Some(share);
            self.lent[share.source] = self.lent[share.source].max(share.len);
        }
    }

    /// Row `row`'s contents from position `from` on are being replaced: its own share and every
    /// share taken from it end at `from`.
    pub fn changed(&mut self, row: usize, from: usize) {
        let own = self.of_row[row].is_some_and(|s| s.len > from);
        if !own && self.lent[row] <= from {
            return;
        }
        for (r, slot) in self.of_row.iter_mut().enumerate() {
            if let Some(share) = slot {
                if r == row || share.source == row {
                    share.len = share.len.min(from);
                }
                if share.len == 0 {
                    *slot = None;
                }
            }
        }
        self.lent[row] = self.lent[row].min(from);
    }

    pub fn clear(&mut self) {
        self.of_row.iter_mut().for_each(|s| *s = None);
        self.lent.iter_mut().for_each(|l| *l = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(source: usize, len: usize) -> Option<SharedPrefix> {
        Some(SharedPrefix { source, len })
    }

    #[test]
    fn copies_of_copies_share_with_the_original() {
        let mut shares = SharedPrefixes::new(4);
        shares.copied(0, 1, 10);
        shares.copied(1, 2, 10);
        assert_eq!((shares.get(0), shares.get(1), shares.get(2)), (None, share(0, 10), share(0, 10)));
    }

    #[test]
    fn rewriting_either_side_ends_the_share_there() {
        let mut shares = SharedPrefixes::new(3);
        shares.copied(0, 1, 10);
        shares.copied(0, 2, 10);
        shares.changed(0, 10); // appending to the source leaves the prefix intact
        assert_eq!(shares.get(1), share(0, 10));
        shares.changed(1, 6); // row 1 truncated and rewritten from 6
        assert_eq!((shares.get(1), shares.get(2)), (share(0, 6), share(0, 10)));
        shares.changed(0, 4); // the source rewritten from 4 shortens both
        assert_eq!((shares.get(1), shares.get(2)), (share(0, 4), share(0, 4)));
        shares.changed(0, 0);
        assert_eq!((shares.get(1), shares.get(2)), (None, None));
    }

    #[test]
    fn copying_over_a_source_drops_what_it_lent() {
        let mut shares = SharedPrefixes::new(3);
        shares.copied(0, 1, 10);
        shares.copied(1, 0, 12); // row 1 copied back over its own source
        assert_eq!((shares.get(0), shares.get(1)), (share(1, 12), None));
        shares.copied(2, 1, 0); // an empty row shares nothing
        assert_eq!((shares.get(0), shares.get(1)), (None, None));
    }
}
