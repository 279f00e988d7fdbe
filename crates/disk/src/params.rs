//! The DiskSim 4.0 parameter-file language: lexer, parser and typed access.
//!
//! A `.parv` file is a sequence of top-level statements: block definitions
//! (`disksim_disk NAME { Param = value, ... }`), `source FILE` (textual inclusion
//! of another file's statements), `instantiate [ names ] as TYPE_NAME`, and
//! `topology TYPE NAME [ children ]`. A parameter value is a number, a word, a
//! nested block (`dm_mech_g1 { ... }`), a list (`[ a, b, ... ]`), or `source FILE`,
//! which parses FILE and takes its single block as the value.
//!
//! Everything here validates at the edge: any malformed input yields a
//! [`LoadError`] naming the file, line and parameter, never a panic. Nesting and
//! `source` depth are bounded so hostile input cannot exhaust the stack.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::LoadError;

/// Deepest nesting of blocks and lists accepted (the shipped files use 4).
const NESTING_DEPTH_MAX: usize = 64;
/// Deepest chain of `source` inclusions accepted (the shipped files use 3).
const SOURCE_DEPTH_MAX: usize = 16;

/// Where a token or value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// File name as it was named (a path, or a built-in model's file name).
    pub file: Arc<str>,
    /// One-based line number.
    pub line: u32,
}

impl std::fmt::Display for Location {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.file, self.line)
    }
}

/// A parameter value with its location.
#[derive(Debug, Clone)]
pub struct Value {
    /// The value itself.
    pub kind: ValueKind,
    /// Where it was written.
    pub location: Location,
}

/// The forms a value takes.
#[derive(Debug, Clone)]
pub enum ValueKind {
    /// A number or a bare word, kept as written and converted on access.
    Scalar(String),
    /// A nested block.
    Block(Block),
    /// A list of values.
    List(Vec<Value>),
}

/// One `Name = value` entry of a block.
#[derive(Debug, Clone)]
pub struct Parameter {
    /// The parameter name, words joined by single spaces.
    pub name: String,
    /// Its value.
    pub value: Value,
}

/// A block: `TYPE [NAME] { parameters }`.
#[derive(Debug, Clone)]
pub struct Block {
    /// The block type, such as `disksim_disk` or `dm_layout_g1`.
    pub type_name: String,
    /// The block's name when it is a top-level definition.
    pub name: Option<String>,
    /// Its parameters in file order.
    pub parameters: Vec<Parameter>,
    /// Where the block starts.
    pub location: Location,
}

/// A node of the `topology` statement: `TYPE NAME [ children ]`.
#[derive(Debug, Clone)]
pub struct TopologyNode {
    /// Component type, such as `disksim_bus`.
    pub type_name: String,
    /// Instance name, such as `bus0`.
    pub instance_name: String,
    /// Components attached below it.
    pub children: Vec<TopologyNode>,
}

/// `instantiate [ names ] as TYPE_NAME`.
#[derive(Debug, Clone)]
pub struct Instantiation {
    /// The instance names created.
    pub instance_names: Vec<String>,
    /// The block definition they are instances of.
    pub definition_name: String,
    /// Where the statement is.
    pub location: Location,
}

/// A whole parsed `.parv` with everything it sources.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// Named top-level block definitions, in order.
    pub definitions: Vec<Block>,
    /// Instantiations, in order.
    pub instantiations: Vec<Instantiation>,
    /// Topology trees, in order.
    pub topology: Vec<TopologyNode>,
}

impl Document {
    /// The definition named `name`.
    pub fn definition(&self, name: &str) -> Option<&Block> {
        self.definitions.iter().find(|block| block.name.as_deref() == Some(name))
    }

    /// The definition that instance `instance_name` instantiates.
    pub fn instance(&self, instance_name: &str) -> Option<&Block> {
        let instantiation = self
            .instantiations
            .iter()
            .rev()
            .find(|instantiation| instantiation.instance_names.iter().any(|name| name == instance_name))?;
        self.definition(&instantiation.definition_name)
    }

    /// Instance names of the given component type in topology order.
    pub fn topology_instances(&self, type_name: &str) -> Vec<String> {
        fn walk(node: &TopologyNode, type_name: &str, found: &mut Vec<String>) {
            if node.type_name == type_name {
                found.push(node.instance_name.clone());
            }
            for child in &node.children {
                walk(child, type_name, found);
            }
        }
        let mut found = Vec::new();
        for node in &self.topology {
            walk(node, type_name, &mut found);
        }
        found
    }
}

/// Reads the files a parameter file names (`source`, seek curves).
pub trait FileSource {
    /// The text of the file named `name` (as written in the referring file).
    fn read(&self, name: &str) -> Result<(Arc<str>, String), LoadError>;
}

/// Files relative to a directory on disk.
#[derive(Debug, Clone)]
pub struct DirectorySource {
    /// Directory that relative names resolve against.
    pub directory: PathBuf,
}

impl FileSource for DirectorySource {
    fn read(&self, name: &str) -> Result<(Arc<str>, String), LoadError> {
        let path = if Path::new(name).is_absolute() { PathBuf::from(name) } else { self.directory.join(name) };
        let display: Arc<str> = Arc::from(path.display().to_string());
        let bytes = std::fs::read(&path)
            .map_err(|error| LoadError::Io { file: display.to_string(), message: error.to_string() })?;
        let text = String::from_utf8(bytes).map_err(|error| LoadError::Syntax {
            file: display.to_string(),
            line: 1,
            message: format!("not UTF-8 text: {error}"),
        })?;
        Ok((display, text))
    }
}

/// Files embedded in the binary, by name.
#[derive(Debug, Clone)]
pub struct EmbeddedSource {
    /// File name to contents.
    pub files: HashMap<&'static str, &'static str>,
}

impl FileSource for EmbeddedSource {
    fn read(&self, name: &str) -> Result<(Arc<str>, String), LoadError> {
        let text = self
            .files
            .get(name)
            .ok_or_else(|| LoadError::Io { file: name.to_string(), message: "no such built-in file".to_string() })?;
        Ok((Arc::from(name), (*text).to_string()))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum TokenKind {
    Word(String),
    OpenBrace,
    CloseBrace,
    OpenBracket,
    CloseBracket,
    Comma,
    Equals,
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokenKind,
    line: u32,
}

fn is_punctuation(character: char) -> bool {
    matches!(character, '{' | '}' | '[' | ']' | ',' | '=' | '#')
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut line = 1u32;
    let mut characters = text.char_indices().peekable();
    while let Some(&(start, character)) = characters.peek() {
        let kind = match character {
            '\n' => {
                line += 1;
                characters.next();
                continue;
            }
            '#' => {
                while characters.peek().is_some_and(|&(_, next)| next != '\n') {
                    characters.next();
                }
                continue;
            }
            c if c.is_whitespace() => {
                characters.next();
                continue;
            }
            '{' => TokenKind::OpenBrace,
            '}' => TokenKind::CloseBrace,
            '[' => TokenKind::OpenBracket,
            ']' => TokenKind::CloseBracket,
            ',' => TokenKind::Comma,
            '=' => TokenKind::Equals,
            _ => {
                let mut end = start;
                while let Some(&(index, next)) = characters.peek() {
                    if next.is_whitespace() || is_punctuation(next) {
                        break;
                    }
                    end = index + next.len_utf8();
                    characters.next();
                }
                tokens.push(Token { kind: TokenKind::Word(text[start..end].to_string()), line });
                continue;
            }
        };
        characters.next();
        tokens.push(Token { kind, line });
    }
    tokens
}

/// Parses a whole `.parv` (or any file of top-level statements), following `source`.
pub fn parse_document(source: &dyn FileSource, file_name: &str) -> Result<Document, LoadError> {
    let mut document = Document::default();
    let (file, text) = source.read(file_name)?;
    let mut parser = Parser::new(source, file, &text, 0);
    parser.statements(&mut document)?;
    Ok(document)
}

/// Parses a file that holds exactly one block (a `.model` or `.layout` file).
pub fn parse_block_file(source: &dyn FileSource, file_name: &str) -> Result<Block, LoadError> {
    let (file, text) = source.read(file_name)?;
    Parser::new(source, file, &text, 0).single_block()
}

struct Parser<'a> {
    source: &'a dyn FileSource,
    file: Arc<str>,
    tokens: Vec<Token>,
    position: usize,
    source_depth: usize,
    nesting_depth: usize,
}

impl<'a> Parser<'a> {
    fn new(source: &'a dyn FileSource, file: Arc<str>, text: &str, source_depth: usize) -> Self {
        Parser { source, file, tokens: tokenize(text), position: 0, source_depth, nesting_depth: 0 }
    }

    fn location(&self) -> Location {
        let line = self.tokens.get(self.position).or_else(|| self.tokens.last()).map_or(1, |token| token.line);
        Location { file: self.file.clone(), line }
    }

    fn error(&self, message: impl Into<String>) -> LoadError {
        let location = self.location();
        LoadError::Syntax { file: location.file.to_string(), line: location.line, message: message.into() }
    }

    fn peek(&self) -> Option<&TokenKind> {
        self.tokens.get(self.position).map(|token| &token.kind)
    }

    fn peek_at(&self, offset: usize) -> Option<&TokenKind> {
        self.tokens.get(self.position + offset).map(|token| &token.kind)
    }

    fn next_word(&mut self, what: &str) -> Result<String, LoadError> {
        match self.peek() {
            Some(TokenKind::Word(word)) => {
                let word = word.clone();
                self.position += 1;
                Ok(word)
            }
            Some(other) => Err(self.error(format!("expected {what}, found {}", describe(other)))),
            None => Err(self.error(format!("expected {what}, found the end of the file"))),
        }
    }

    fn expect(&mut self, kind: TokenKind) -> Result<(), LoadError> {
        match self.peek() {
            Some(found) if *found == kind => {
                self.position += 1;
                Ok(())
            }
            Some(found) => Err(self.error(format!("expected {}, found {}", describe(&kind), describe(found)))),
            None => Err(self.error(format!("expected {}, found the end of the file", describe(&kind)))),
        }
    }

    fn eat(&mut self, kind: &TokenKind) -> bool {
        if self.peek() == Some(kind) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), LoadError> {
        self.nesting_depth += 1;
        if self.nesting_depth > NESTING_DEPTH_MAX {
            return Err(self.error(format!("blocks and lists nested deeper than {NESTING_DEPTH_MAX}")));
        }
        Ok(())
    }

    fn statements(&mut self, document: &mut Document) -> Result<(), LoadError> {
        while let Some(kind) = self.peek().cloned() {
            let TokenKind::Word(word) = kind else {
                return Err(self.error(format!("expected a statement, found {}", describe(&kind))));
            };
            match word.as_str() {
                "source" => {
                    self.position += 1;
                    let name = self.next_word("a file name after `source`")?;
                    self.include(&name, document)?;
                }
                "instantiate" => self.instantiate(document)?,
                "topology" => {
                    self.position += 1;
                    let node = self.topology_node()?;
                    document.topology.push(node);
                }
                _ => {
                    let block = self.block_definition()?;
                    document.definitions.push(block);
                }
            }
        }
        Ok(())
    }

    fn include(&mut self, name: &str, document: &mut Document) -> Result<(), LoadError> {
        if self.source_depth >= SOURCE_DEPTH_MAX {
            return Err(self.error(format!("`source {name}` nested deeper than {SOURCE_DEPTH_MAX} files")));
        }
        let (file, text) = self.source.read(name).map_err(|error| self.wrap_source_error(name, error))?;
        let mut included = Parser::new(self.source, file, &text, self.source_depth + 1);
        included.statements(document)
    }

    fn wrap_source_error(&self, name: &str, error: LoadError) -> LoadError {
        match error {
            LoadError::Io { message, .. } => self.error(format!("cannot read sourced file `{name}`: {message}")),
            other => other,
        }
    }

    fn instantiate(&mut self, document: &mut Document) -> Result<(), LoadError> {
        let location = self.location();
        self.position += 1;
        self.expect(TokenKind::OpenBracket)?;
        let mut instance_names = Vec::new();
        while !self.eat(&TokenKind::CloseBracket) {
            instance_names.push(self.next_word("an instance name")?);
            self.eat(&TokenKind::Comma);
        }
        let keyword = self.next_word("`as`")?;
        if keyword != "as" {
            return Err(self.error(format!("expected `as` after the instance names, found `{keyword}`")));
        }
        let definition_name = self.next_word("a block name after `as`")?;
        document.instantiations.push(Instantiation { instance_names, definition_name, location });
        Ok(())
    }

    fn topology_node(&mut self) -> Result<TopologyNode, LoadError> {
        self.enter()?;
        let type_name = self.next_word("a component type")?;
        let instance_name = self.next_word("a component name")?;
        self.expect(TokenKind::OpenBracket)?;
        let mut children = Vec::new();
        while !self.eat(&TokenKind::CloseBracket) {
            children.push(self.topology_node()?);
            self.eat(&TokenKind::Comma);
        }
        self.nesting_depth -= 1;
        Ok(TopologyNode { type_name, instance_name, children })
    }

    fn block_definition(&mut self) -> Result<Block, LoadError> {
        let location = self.location();
        let type_name = self.next_word("a block type")?;
        let name = match self.peek() {
            Some(TokenKind::OpenBrace) => None,
            _ => Some(self.next_word("a block name or `{`")?),
        };
        self.block_body(type_name, name, location)
    }

    fn single_block(&mut self) -> Result<Block, LoadError> {
        let block = self.block_definition()?;
        if let Some(kind) = self.peek().cloned() {
            return Err(self.error(format!("expected the end of the file after one block, found {}", describe(&kind))));
        }
        Ok(block)
    }

    fn block_body(&mut self, type_name: String, name: Option<String>, location: Location) -> Result<Block, LoadError> {
        self.enter()?;
        self.expect(TokenKind::OpenBrace)?;
        let mut parameters = Vec::new();
        loop {
            if self.eat(&TokenKind::CloseBrace) {
                break;
            }
            if self.peek().is_none() {
                return Err(self.error(format!("block `{type_name}` opened at line {} is never closed", location.line)));
            }
            parameters.push(self.parameter()?);
            if !self.eat(&TokenKind::Comma) && self.peek() != Some(&TokenKind::CloseBrace) {
                let found = self.peek().map_or_else(|| "the end of the file".to_string(), describe);
                return Err(self.error(format!("expected `,` or `}}` after a parameter, found {found}")));
            }
        }
        self.nesting_depth -= 1;
        Ok(Block { type_name, name, parameters, location })
    }

    fn parameter(&mut self) -> Result<Parameter, LoadError> {
        let mut words = Vec::new();
        loop {
            match self.peek() {
                Some(TokenKind::Word(word)) => {
                    words.push(word.clone());
                    self.position += 1;
                }
                Some(TokenKind::Equals) if !words.is_empty() => {
                    self.position += 1;
                    break;
                }
                Some(other) => {
                    return Err(self.error(format!("expected `Parameter name = value`, found {}", describe(other))))
                }
                None => return Err(self.error("expected `Parameter name = value`, found the end of the file")),
            }
        }
        let name = words.join(" ");
        let value = self.value().map_err(|error| error.with_parameter(&name))?;
        Ok(Parameter { name, value })
    }

    fn value(&mut self) -> Result<Value, LoadError> {
        let location = self.location();
        match self.peek().cloned() {
            Some(TokenKind::OpenBracket) => {
                self.position += 1;
                self.list(location)
            }
            Some(TokenKind::Word(word)) if word == "source" && matches!(self.peek_at(1), Some(TokenKind::Word(_))) => {
                self.position += 1;
                let name = self.next_word("a file name after `source`")?;
                self.sourced_block(&name, location)
            }
            Some(TokenKind::Word(word)) => {
                self.position += 1;
                if self.peek() == Some(&TokenKind::OpenBrace) {
                    let block = self.block_body(word, None, location.clone())?;
                    return Ok(Value { kind: ValueKind::Block(block), location });
                }
                Ok(Value { kind: ValueKind::Scalar(word), location })
            }
            Some(other) => Err(self.error(format!("expected a value, found {}", describe(&other)))),
            None => Err(self.error("expected a value, found the end of the file")),
        }
    }

    fn list(&mut self, location: Location) -> Result<Value, LoadError> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            if self.eat(&TokenKind::CloseBracket) {
                break;
            }
            if self.peek().is_none() {
                return Err(self.error(format!("list opened at line {} is never closed", location.line)));
            }
            items.push(self.value()?);
            if !self.eat(&TokenKind::Comma) && self.peek() != Some(&TokenKind::CloseBracket) {
                let found = self.peek().map_or_else(|| "the end of the file".to_string(), describe);
                return Err(self.error(format!("expected `,` or `]` in a list, found {found}")));
            }
        }
        self.nesting_depth -= 1;
        Ok(Value { kind: ValueKind::List(items), location })
    }

    fn sourced_block(&mut self, name: &str, location: Location) -> Result<Value, LoadError> {
        if self.source_depth >= SOURCE_DEPTH_MAX {
            return Err(self.error(format!("`source {name}` nested deeper than {SOURCE_DEPTH_MAX} files")));
        }
        let (file, text) = self.source.read(name).map_err(|error| self.wrap_source_error(name, error))?;
        let block = Parser::new(self.source, file, &text, self.source_depth + 1).single_block()?;
        Ok(Value { kind: ValueKind::Block(block), location })
    }
}

fn describe(kind: &TokenKind) -> String {
    match kind {
        TokenKind::Word(word) => format!("`{word}`"),
        TokenKind::OpenBrace => "`{`".to_string(),
        TokenKind::CloseBrace => "`}`".to_string(),
        TokenKind::OpenBracket => "`[`".to_string(),
        TokenKind::CloseBracket => "`]`".to_string(),
        TokenKind::Comma => "`,`".to_string(),
        TokenKind::Equals => "`=`".to_string(),
    }
}

impl Value {
    fn bad(&self, parameter: &str, message: impl Into<String>) -> LoadError {
        LoadError::BadValue {
            file: self.location.file.to_string(),
            line: self.location.line,
            parameter: parameter.to_string(),
            message: message.into(),
        }
    }

    /// The scalar text, or an error naming `parameter`.
    pub fn scalar(&self, parameter: &str) -> Result<&str, LoadError> {
        match &self.kind {
            ValueKind::Scalar(text) => Ok(text),
            _ => Err(self.bad(parameter, "expected a number or word, found a block or list")),
        }
    }

    /// The value as a finite float.
    pub fn float(&self, parameter: &str) -> Result<f64, LoadError> {
        let text = self.scalar(parameter)?;
        match text.parse::<f64>() {
            Ok(number) if number.is_finite() => Ok(number),
            _ => Err(self.bad(parameter, format!("expected a number, found `{text}`"))),
        }
    }

    /// The value as an integer (DiskSim accepts `12` and `12.0`).
    pub fn integer(&self, parameter: &str) -> Result<i64, LoadError> {
        let text = self.scalar(parameter)?;
        if let Ok(number) = text.parse::<i64>() {
            return Ok(number);
        }
        match text.parse::<f64>() {
            Ok(number) if number.fract() == 0.0 && number.abs() < 9.0e15 => Ok(number as i64),
            _ => Err(self.bad(parameter, format!("expected an integer, found `{text}`"))),
        }
    }

    /// The value as a nested block.
    pub fn block(&self, parameter: &str) -> Result<&Block, LoadError> {
        match &self.kind {
            ValueKind::Block(block) => Ok(block),
            _ => Err(self.bad(parameter, "expected a block")),
        }
    }

    /// The value as a list.
    pub fn list(&self, parameter: &str) -> Result<&[Value], LoadError> {
        match &self.kind {
            ValueKind::List(items) => Ok(items),
            _ => Err(self.bad(parameter, "expected a list `[ ... ]`")),
        }
    }
}

impl Block {
    /// The last value given for `name` (DiskSim lets later entries win).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.parameters.iter().rev().find(|parameter| parameter.name.eq_ignore_ascii_case(name)).map(|p| &p.value)
    }

    /// The value for `name`, or an error saying it is missing from this block.
    pub fn require(&self, name: &str) -> Result<&Value, LoadError> {
        self.get(name).ok_or_else(|| LoadError::MissingParameter {
            file: self.location.file.to_string(),
            line: self.location.line,
            block: self.name.clone().unwrap_or_else(|| self.type_name.clone()),
            parameter: name.to_string(),
        })
    }

    /// A required float.
    pub fn float(&self, name: &str) -> Result<f64, LoadError> {
        self.require(name)?.float(name)
    }

    /// An optional float with a default.
    pub fn float_or(&self, name: &str, default: f64) -> Result<f64, LoadError> {
        self.get(name).map_or(Ok(default), |value| value.float(name))
    }

    /// A required integer.
    pub fn integer(&self, name: &str) -> Result<i64, LoadError> {
        self.require(name)?.integer(name)
    }

    /// An optional integer with a default.
    pub fn integer_or(&self, name: &str, default: i64) -> Result<i64, LoadError> {
        self.get(name).map_or(Ok(default), |value| value.integer(name))
    }

    /// Sets `name` to a scalar, replacing an existing entry or appending one.
    pub fn set_scalar(&mut self, name: &str, text: &str, location: Location) {
        let value = Value { kind: ValueKind::Scalar(text.to_string()), location };
        match self.parameters.iter_mut().rev().find(|parameter| parameter.name.eq_ignore_ascii_case(name)) {
            Some(parameter) => parameter.value = value,
            None => self.parameters.push(Parameter { name: name.to_string(), value }),
        }
    }

    /// Finds the block holding parameter `name`: this block, or the first nested
    /// block (depth first) that holds it.
    pub fn holder_of_mut(&mut self, name: &str) -> Option<&mut Block> {
        if self.get(name).is_some() {
            return Some(self);
        }
        for parameter in &mut self.parameters {
            if let ValueKind::Block(child) = &mut parameter.value.kind {
                if let Some(found) = child.holder_of_mut(name) {
                    return Some(found);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_of(files: &[(&'static str, &'static str)]) -> EmbeddedSource {
        EmbeddedSource { files: files.iter().copied().collect() }
    }

    #[test]
    fn parses_blocks_lists_and_sources() {
        let source = source_of(&[
            ("a.parv", "disksim_disk D { Model = source m.model, Max queue length = 8,\n Scheduler = q { P = 1 } }\ninstantiate [ disk0 ] as D\ntopology disksim_bus bus0 [ disksim_disk disk0 [] ]"),
            ("m.model", "dm_disk m.model { List = [ 1, 2.5, [ x ], ], Name with (units) = word }"),
        ]);
        let document = parse_document(&source, "a.parv").unwrap();
        let disk = document.instance("disk0").unwrap();
        assert_eq!(disk.integer("Max queue length").unwrap(), 8);
        let model = disk.require("Model").unwrap().block("Model").unwrap();
        assert_eq!(model.require("List").unwrap().list("List").unwrap().len(), 3);
        assert_eq!(model.require("Name with (units)").unwrap().scalar("x").unwrap(), "word");
        assert_eq!(document.topology_instances("disksim_disk"), vec!["disk0".to_string()]);
    }

    #[test]
    fn errors_name_file_line_and_parameter() {
        let source = source_of(&[("bad.parv", "disksim_disk D {\n  Max queue length = [ 1,\n}\n")]);
        let error = parse_document(&source, "bad.parv").unwrap_err().to_string();
        assert!(error.contains("bad.parv:3"), "{error}");
        assert!(error.contains("Max queue length"), "{error}");
    }

    #[test]
    fn missing_source_file_is_an_error() {
        let source = source_of(&[("a.parv", "source nowhere.diskspecs\n")]);
        let error = parse_document(&source, "a.parv").unwrap_err().to_string();
        assert!(error.contains("a.parv:1") && error.contains("nowhere.diskspecs"), "{error}");
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed() {
        let text: &'static str = Box::leak(format!("b {{ x = {} }}", "[".repeat(10_000)).into_boxed_str());
        let source = source_of(&[("deep.parv", text)]);
        assert!(parse_document(&source, "deep.parv").is_err());
    }

    #[test]
    fn self_sourcing_is_bounded() {
        let source = source_of(&[("loop.parv", "source loop.parv\n")]);
        assert!(parse_document(&source, "loop.parv").is_err());
    }
}
