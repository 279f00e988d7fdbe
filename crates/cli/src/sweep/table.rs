//! The sweep's combined table: one row per cell in grid order, the cell's key
//! and parameters, then every field of its result (nested objects flattened
//! with `.`, arrays as JSON text, a field named as a parameter prefixed with
//! `result.`), written as CSV and as an Arrow IPC file.
//!
//! A column's type is what all its values share: integers (Int64), numbers
//! (Float64), booleans, otherwise text; a cell without the field is null (an
//! empty CSV field). The same results give the same bytes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{ArrowError, DataType, Field, Schema};
use serde_json::{Map, Value};

/// Rows of named values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// One value per column per row (`Null` where a row lacks it).
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    /// The table of `rows`, each `(key, parameters, result)`.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = (&'a str, &'a [(String, Value)], &'a Value)>) -> Table {
        let mut table = Table { columns: vec!["cell".to_string()], rows: Vec::new() };
        let mut flattened = Vec::new();
        for (key, parameters, result) in rows {
            let mut fields: Vec<(String, Value)> = vec![("cell".to_string(), Value::from(key))];
            fields.extend(parameters.iter().cloned());
            if let Value::Object(map) = result {
                let mut result_fields = Vec::new();
                flatten("", map, &mut result_fields);
                for (name, value) in result_fields {
                    // A result field named as a parameter (replay's `trace`) keeps both.
                    let clash = fields.iter().any(|(existing, _)| existing == &name);
                    fields.push((if clash { format!("result.{name}") } else { name }, value));
                }
            }
            for (name, _) in &fields {
                if !table.columns.contains(name) {
                    table.columns.push(name.clone());
                }
            }
            flattened.push(fields);
        }
        for fields in flattened {
            let row = table
                .columns
                .iter()
                .map(|column| {
                    fields.iter().find(|(name, _)| name == column).map_or(Value::Null, |(_, value)| value.clone())
                })
                .collect();
            table.rows.push(row);
        }
        table
    }

    /// The values of column `name`, if there is one.
    pub fn column(&self, name: &str) -> Option<Vec<&Value>> {
        let index = self.columns.iter().position(|column| column == name)?;
        Some(self.rows.iter().map(|row| &row[index]).collect())
    }

    /// Writes the table as CSV (RFC 4180 quoting).
    pub fn write_csv(&self, path: &Path) -> std::io::Result<()> {
        let mut writer = BufWriter::new(File::create(path)?);
        let header: Vec<String> = self.columns.iter().map(|column| csv_field(column)).collect();
        writeln!(writer, "{}", header.join(","))?;
        for row in &self.rows {
            let fields: Vec<String> = row.iter().map(|value| csv_field(&value_text(value))).collect();
            writeln!(writer, "{}", fields.join(","))?;
        }
        writer.flush()
    }

    /// Writes the table as one record batch in an Arrow IPC file.
    pub fn write_arrow(&self, path: &Path) -> Result<(), ArrowError> {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (index, name) in self.columns.iter().enumerate() {
            let values: Vec<&Value> = self.rows.iter().map(|row| &row[index]).collect();
            let (data_type, array) = arrow_column(&values);
            fields.push(Field::new(name, data_type, true));
            arrays.push(array);
        }
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
        let file = File::create(path).map_err(|error| ArrowError::IoError(error.to_string(), error))?;
        let mut writer = FileWriter::try_new(BufWriter::new(file), &schema)?;
        writer.write(&batch)?;
        writer.finish()
    }
}

fn flatten(prefix: &str, map: &Map<String, Value>, fields: &mut Vec<(String, Value)>) {
    for (name, value) in map {
        let name = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match value {
            Value::Object(inner) => flatten(&name, inner, fields),
            Value::Array(_) => fields.push((name, Value::String(value.to_string()))),
            scalar => fields.push((name, scalar.clone())),
        }
    }
}

/// A value as CSV text: strings bare, numbers and booleans as JSON writes them, null empty.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The column's type and values.
fn arrow_column(values: &[&Value]) -> (DataType, ArrayRef) {
    let present = || values.iter().filter(|value| !value.is_null());
    if present().all(|value| value.is_i64()) {
        let array = Int64Array::from(values.iter().map(|value| value.as_i64()).collect::<Vec<_>>());
        (DataType::Int64, Arc::new(array))
    } else if present().all(|value| value.is_number()) {
        let array = Float64Array::from(values.iter().map(|value| value.as_f64()).collect::<Vec<_>>());
        (DataType::Float64, Arc::new(array))
    } else if present().all(|value| value.is_boolean()) {
        let array = BooleanArray::from(values.iter().map(|value| value.as_bool()).collect::<Vec<_>>());
        (DataType::Boolean, Arc::new(array))
    } else {
        let texts: Vec<Option<String>> =
            values.iter().map(|value| (!value.is_null()).then(|| value_text(value))).collect();
        (DataType::Utf8, Arc::new(StringArray::from(texts)))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_ipc::reader::FileReader;
    use serde_json::json;

    use super::*;

    #[test]
    fn results_flatten_into_typed_columns_that_read_back() {
        let parameters = [("layout".to_string(), json!("proximal")), ("seed".to_string(), json!(1))];
        let first = json!({"iops": 10.5, "requests": 3, "target": {"kind": "volume"}, "rows": [1, 2], "seed": 1});
        let second = json!({"iops": 11, "requests": 4, "extra": true});
        let table = Table::from_rows([("a", &parameters[..], &first), ("b", &parameters[..], &second)]);
        assert_eq!(
            table.columns,
            ["cell", "layout", "seed", "iops", "requests", "rows", "result.seed", "target.kind", "extra"]
        );
        assert_eq!(table.rows[1][6], Value::Null);
        assert_eq!(table.rows[1][7], Value::Null);
        let folder = tempfile::tempdir().unwrap();
        let csv = folder.path().join("t.csv");
        table.write_csv(&csv).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().nth(1).unwrap(), "a,proximal,1,10.5,3,\"[1,2]\",1,volume,");
        let arrow = folder.path().join("t.arrow");
        table.write_arrow(&arrow).unwrap();
        let reader = FileReader::try_new(File::open(&arrow).unwrap(), None).unwrap();
        let schema = reader.schema();
        let types: Vec<&DataType> = schema.fields().iter().map(|field| field.data_type()).collect();
        use DataType::*;
        assert_eq!(types, [&Utf8, &Utf8, &Int64, &Float64, &Int64, &Utf8, &Int64, &Utf8, &Boolean]);
        let batches: Vec<RecordBatch> = reader.map(|batch| batch.unwrap()).collect();
        assert_eq!(batches[0].num_rows(), 2);
        assert!(batches[0].column(8).is_null(0) && !batches[0].column(8).is_null(1));
    }
}
