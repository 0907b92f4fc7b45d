//! `keeperd <zoo.cfg>`: runs the server with the given configuration.

fn main() {
    keeperd::main()
}
