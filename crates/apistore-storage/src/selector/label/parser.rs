//! The label selector grammar, after apimachinery's lexer and recursive-descent parser.
//!
//! ```text
//! selector    ::= requirement | requirement "," selector
//! requirement ::= ["!"] KEY [ ("in" | "notin") "(" values ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! values      ::= VALUE | VALUE "," values          (VALUE may be empty)
//! ```
//!
//! The lexer works on bytes as the reference's does, quirks included: whitespace is
//! space, tab, CR and LF; `in`/`notin` are keywords only where an operator may stand; a
//! NUL byte ends the selector where a token would start (so `"\0anything"` selects
//! everything) and is swallowed where it ends a token.

use super::{Requirement, check_key};
use crate::selector::{Operator, SelectorError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Whether `in`/`notin` are read as keywords or as plain identifiers (values, keys).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

const OPERATORS_EXPECTED: &str = "in, notin, =, ==, !=, gt, lt";

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// The next byte, or 0 at the end (so a NUL byte reads as the end, as in Go).
    fn read(&mut self) -> u8 {
        match self.text.as_bytes().get(self.pos) {
            Some(&byte) => {
                self.pos += 1;
                byte
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn slice(&self, start: usize, end: usize) -> &'a str {
        // Tokens end at ASCII bytes, so these are always char boundaries.
        self.text.get(start..end).unwrap_or_default()
    }

    fn lex(&mut self) -> (Token, &'a str) {
        let mut byte = self.read();
        while is_whitespace(byte) {
            byte = self.read();
        }
        if byte == 0 {
            return (Token::EndOfString, "");
        }
        self.unread();
        if is_special(byte) {
            self.special_symbol()
        } else {
            self.identifier_or_keyword()
        }
    }

    fn identifier_or_keyword(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let end = loop {
            let before = self.pos;
            let byte = self.read();
            if byte == 0 {
                break before;
            }
            if is_special(byte) || is_whitespace(byte) {
                self.unread();
                break before;
            }
        };
        let literal = self.slice(start, end);
        let token = match literal {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Identifier,
        };
        (token, literal)
    }

    /// The longest operator at the cursor: `!=` and `==` over `!` and `=`.
    fn special_symbol(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let first = self.read();
        let second = self.text.as_bytes().get(self.pos).copied();
        let token = match (first, second) {
            (b'!', Some(b'=')) => Token::NotEquals,
            (b'=', Some(b'=')) => Token::DoubleEquals,
            (b'!', _) => Token::DoesNotExist,
            (b'=', _) => Token::Equals,
            (b'(', _) => Token::OpenPar,
            (b')', _) => Token::ClosedPar,
            (b',', _) => Token::Comma,
            (b'>', _) => Token::GreaterThan,
            _ => Token::LessThan,
        };
        if matches!(token, Token::NotEquals | Token::DoubleEquals) {
            self.pos += 1;
        }
        let literal = self.slice(start, self.pos);
        // The reference reads one byte past the operator and gives it back unless it
        // is the end: a NUL right after an operator is swallowed.
        if self.text.as_bytes().get(self.pos) == Some(&0) {
            self.pos += 1;
        }
        (token, literal)
    }
}

struct Parser<'a> {
    selector: &'a str,
    items: Vec<(Token, &'a str)>,
    position: usize,
}

type ParseResult<T> = Result<T, SelectorError>;

/// The requirements of `selector` in the order written.
pub(super) fn parse(selector: &str) -> ParseResult<Vec<Requirement>> {
    let mut lexer = Lexer {
        text: selector,
        pos: 0,
    };
    let mut items = Vec::new();
    loop {
        let item = lexer.lex();
        items.push(item);
        if item.0 == Token::EndOfString {
            break;
        }
    }
    let mut parser = Parser {
        selector,
        items,
        position: 0,
    };
    parser.parse()
}

impl<'a> Parser<'a> {
    fn error(&self, reason: String) -> SelectorError {
        SelectorError::Parse {
            selector: self.selector.to_owned(),
            reason,
        }
    }

    fn requirement_error(&self, reason: String) -> SelectorError {
        self.error(format!("unable to parse requirement: {reason}"))
    }

    fn lookahead(&self, context: Context) -> (Token, &'a str) {
        let (token, literal) = self
            .items
            .get(self.position)
            .copied()
            .unwrap_or((Token::EndOfString, ""));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'a str) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> ParseResult<Vec<Requirement>> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    requirements.push(self.parse_requirement()?);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if !matches!(next, Token::Identifier | Token::DoesNotExist) {
                                return Err(self.error(format!(
                                    "found '{literal}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(self.error(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(self.error(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> ParseResult<Requirement> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(operator @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return Requirement::validated(key, operator, Vec::new(), self.selector);
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::validated(key, operator, values, self.selector)
    }

    /// The key, and the operator when it is implied: `!key` or a bare `key` followed by
    /// `,` or the end.
    fn parse_key_and_infer_operator(&mut self) -> ParseResult<(&'a str, Option<Operator>)> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let mut operator = None;
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(self.requirement_error(format!("found '{literal}', expected: identifier")));
        }
        check_key(literal, self.selector)?;
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> ParseResult<Operator> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(self.requirement_error(format!(
                    "found '{literal}', expected: {OPERATORS_EXPECTED}"
                )));
            }
        })
    }

    /// `(a,b,c)`; empty entries are the empty value, and `()` is the empty value alone.
    fn parse_values(&mut self) -> ParseResult<Vec<String>> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(self.requirement_error(format!("found '{literal}' expected: '('")));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // The list ends only in front of ')'.
                self.consume(Context::Values);
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(self.requirement_error(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            ))),
        }
    }

    fn parse_identifiers_list(&mut self) -> ParseResult<Vec<String>> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal.to_owned());
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => {
                            return Err(self.requirement_error(format!(
                                "found '{next_literal}', expected: ',' or ')'"
                            )));
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                _ => {
                    return Err(self.requirement_error(format!(
                        "found '{literal}', expected: ',', or identifier"
                    )));
                }
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing (end or `,`) is the empty
    /// value.
    fn parse_exact_value(&mut self) -> ParseResult<Vec<String>> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            return Ok(vec![literal.to_owned()]);
        }
        Err(self.requirement_error(format!("found '{literal}', expected: identifier")))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
fn tokens_of(text: &str) -> Vec<&'static str> {
    let mut lexer = Lexer { text, pos: 0 };
    let mut names = Vec::new();
    loop {
        let (token, _) = lexer.lex();
        if token == Token::EndOfString {
            return names;
        }
        names.push(match token {
            Token::ClosedPar => ")",
            Token::Comma => ",",
            Token::DoesNotExist => "!",
            Token::DoubleEquals => "==",
            Token::Equals => "=",
            Token::GreaterThan => ">",
            Token::Identifier => "id",
            Token::In => "in",
            Token::LessThan => "<",
            Token::NotEquals => "!=",
            Token::NotIn => "notin",
            Token::OpenPar => "(",
            Token::EndOfString => "",
        });
    }
}
