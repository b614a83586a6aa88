//! placeholder

pub mod image;
