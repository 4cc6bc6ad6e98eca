//! The `#[cube]` layer every GPU family builds on: a table's shape and hash functions ([`shape`]), how slots
//! hold pairs ([`layout`]), a key's bucket per probe under a scheme ([`probe`]), and the cooperative find of the
//! device API ([`find`]).

pub mod find;
pub mod layout;
pub mod probe;
pub mod shape;
