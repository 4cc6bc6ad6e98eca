//! The `#[cube]` layer every GPU family builds on: a table's shape and bucket addressing ([`meta`]), how slots
//! hold pairs ([`layout`]), and the cooperative find of the device API ([`find`]).

pub mod find;
pub mod layout;
pub mod meta;
