//! Lowe's memoization for the Wing & Gong search, with subsumption of indefinite operations.
//!
//! A configuration is (set of linearized operations, model state). The set is a bitset split in
//! two parts: definite operations and indefinite (`info`) ones. Two configurations with the
//! same definite part and state differ only in which indefinite operations were used up; the
//! one that used fewer can do everything the other can (an indefinite operation may also never
//! happen), so once a configuration was visited, any configuration that used a superset of its
//! indefinite operations is pruned. Without indefinite operations this is Lowe's exact cache.
//!
//! Storage is flat: records live in parallel vectors, the bitsets of all records in one `Vec`,
//! and the hash table holds only record numbers. Records with the same definite part and state
//! form a chain through `next`.

use hashbrown::HashTable;

const NIL: u32 = u32::MAX;

/// The set of visited configurations of one search.
pub struct Cache<S> {
    table: HashTable<u32>,
    bits: Vec<u64>,
    states: Vec<S>,
    hashes: Vec<u64>,
    next: Vec<u32>,
    definite_words: usize,
    words: usize,
}

impl<S: Clone + Eq> Cache<S> {
    /// An empty cache for bitsets of `definite_words` + `indefinite_words` words.
    pub fn new(definite_words: usize, indefinite_words: usize) -> Cache<S> {
        Cache {
            table: HashTable::new(),
            bits: Vec::new(),
            states: Vec::new(),
            hashes: Vec::new(),
            next: Vec::new(),
            definite_words,
            words: definite_words + indefinite_words,
        }
    }

    /// Records the configuration (`bits`, `state`) and returns true, unless a visited
    /// configuration covers it; `hash` must depend only on the definite part and the state.
    pub fn visit(&mut self, hash: u64, bits: &[u64], state: &S) -> bool {
        debug_assert_eq!(bits.len(), self.words);
        let (definite, indefinite) = bits.split_at(self.definite_words);
        let (w, dw) = (self.words, self.definite_words);
        let found = self.table.find_mut(hash, |&r| {
            let r = r as usize;
            self.states[r] == *state && self.bits[r * w..r * w + dw] == *definite
        });
        let record = self.states.len() as u32;
        match found {
            Some(head) => {
                let mut r = *head;
                while r != NIL {
                    let at = r as usize * w + dw;
                    let seen = &self.bits[at..at + (w - dw)];
                    if seen.iter().zip(indefinite).all(|(s, c)| s & !c == 0) {
                        return false;
                    }
                    r = self.next[r as usize];
                }
                self.next.push(*head);
                *head = record;
            }
            None => {
                self.next.push(NIL);
                let hashes = &self.hashes;
                self.table
                    .insert_unique(hash, record, |&r| hashes[r as usize]);
            }
        }
        self.bits.extend_from_slice(bits);
        self.states.push(state.clone());
        self.hashes.push(hash);
        true
    }

    /// Bytes held by the cache.
    pub fn bytes(&self) -> usize {
        self.bits.capacity() * 8
            + self.states.capacity() * std::mem::size_of::<S>()
            + self.hashes.capacity() * 8
            + self.next.capacity() * 4
            + self.table.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_configurations_are_seen_once() {
        let mut c: Cache<u8> = Cache::new(1, 0);
        assert!(c.visit(7, &[0b101], &1));
        assert!(!c.visit(7, &[0b101], &1));
        assert!(c.visit(7, &[0b101], &2));
        assert!(c.visit(7, &[0b111], &1));
    }

    #[test]
    fn more_indefinite_ops_used_is_covered_by_fewer() {
        let mut c: Cache<u8> = Cache::new(1, 1);
        assert!(c.visit(3, &[0b1, 0b010], &0));
        assert!(
            !c.visit(3, &[0b1, 0b110], &0),
            "a superset of used info ops is covered"
        );
        assert!(c.visit(3, &[0b1, 0b100], &0), "an incomparable set is not");
        assert!(c.visit(3, &[0b1, 0b000], &0), "a subset is not");
        assert!(
            !c.visit(3, &[0b1, 0b001], &0),
            "now covered by the empty set"
        );
        assert!(
            c.visit(3, &[0b1, 0b000], &1),
            "another state is another configuration"
        );
    }
}
