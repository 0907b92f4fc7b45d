//! `keeperd-failpoints <zoo.cfg>`: keeperd built with its failpoints (the
//! `failpoints` feature), switched on by the config's `failpoints=` line.

fn main() {
    keeperd::main()
}
