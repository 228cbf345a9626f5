mod judge;
mod parse;
mod shell;
