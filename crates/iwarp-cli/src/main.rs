//! The `iwarp` command line tool.

fn main() {
    println!("iwarp {}", env!("CARGO_PKG_VERSION"));
}
