//! A seeded TPC-C-like workload: closed-loop users running the TPC-C
//! transaction mix over the pages of a warehouse database, through an LRU
//! buffer pool, as the HyLog paper's setup (seed 001: 50 warehouses, 4 KiB
//! pages, a 400 MB LRU buffer pool, 20 users with no think time). The paper's
//! trace (DB2 on TPC-C) is not public; this is a synthetic stand-in with the
//! benchmark's shape, not a TPC-C implementation.
//!
//! **Database.** The nine TPC-C tables at their initial cardinalities
//! (TPC-C 5.11 §1.4 and §4.3) and approximate row sizes, each table a region
//! of pages of its own (table-major, warehouse-major inside), rows packed at
//! [`TpccSpec::fill_factor`]. The tables that grow in TPC-C (orders,
//! new-order, order-line, history) are rings of their initial size per
//! district (per warehouse for history), so the database keeps its size and
//! the oldest rows are overwritten: order-line keeps 15 slots per order (the
//! most an order has). There are no indexes.
//!
//! **Transactions.** The mix of TPC-C §5.2.3: New-Order 45 %, Payment 43 %,
//! Order-Status, Delivery and Stock-Level 4 % each, with NURand choices of
//! customers and items (§2.1.6), 5–15 lines per order, 1 % remote stock and
//! 15 % remote payments, customers by last name 60 % of the time (three
//! customer pages read). Each transaction is a list of logical page accesses
//! (a read, or a read-modify-write counted as a write); a row's page is
//! computed from its key.
//!
//! **Buffer pool.** LRU over `buffer_pool_bytes / page_bytes` frames,
//! write-back: a miss reads the page; the frame it takes, if dirty, is written
//! first, by the user who needs it (no background page cleaners). A hit costs
//! no I/O.
//!
//! **Users.** Each user has its own random stream of the seed and runs one
//! transaction after another without think time. The workload does not keep
//! time: the caller drives it closed-loop, asking a user for its next access
//! only once the previous one (and its physical I/Os) completed, and the
//! shared buffer pool and order counters see the users' accesses in that
//! order.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::buffer_pool::BufferPool;
pub use crate::buffer_pool::PageIo;
use crate::request::Operation;
use crate::synthetic::seeded_stream;

/// The TPC-C transaction types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transaction {
    /// Enter an order of 5–15 lines.
    NewOrder,
    /// Record a customer's payment.
    Payment,
    /// Read a customer's last order.
    OrderStatus,
    /// Deliver the oldest new order of each district.
    Delivery,
    /// Count recently sold items below a stock threshold.
    StockLevel,
}

impl Transaction {
    /// Every type, in the order of [`TpccCounts::transactions`].
    pub const ALL: [Transaction; 5] = [
        Transaction::NewOrder,
        Transaction::Payment,
        Transaction::OrderStatus,
        Transaction::Delivery,
        Transaction::StockLevel,
    ];

    fn index(self) -> usize {
        Transaction::ALL.iter().position(|&kind| kind == self).expect("listed")
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TpccSpec {
    /// Warehouses (the paper: 50).
    pub warehouses: u32,
    /// Page size, bytes (the paper: 4 KiB).
    pub page_bytes: u64,
    /// Buffer pool, bytes (the paper: 400 MB).
    pub buffer_pool_bytes: u64,
    /// Closed-loop users (the paper: 20, its default).
    pub users: u32,
    /// The share of a page rows fill.
    pub fill_factor: f64,
    /// The seed.
    pub seed: u64,
}

impl TpccSpec {
    /// The paper's setup: 50 warehouses, 4 KiB pages, a 400 MB buffer pool,
    /// 20 users; pages filled to 80 %.
    pub fn paper(seed: u64) -> TpccSpec {
        TpccSpec { warehouses: 50, page_bytes: 4096, buffer_pool_bytes: 400 << 20, users: 20, fill_factor: 0.8, seed }
    }
}

/// One logical access of a user to the buffer pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalAccess {
    /// The page.
    pub page: u64,
    /// Whether the transaction modifies it (the page becomes dirty).
    pub write: bool,
    /// The transaction it belongs to.
    pub transaction: Transaction,
}

/// A user's next access and the I/Os it costs: none (a hit), a read, or the
/// write of a dirty evicted page followed by the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStep {
    /// The access.
    pub access: LogicalAccess,
    /// The physical I/Os, in order.
    pub ios: Vec<PageIo>,
}

/// What the workload has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TpccCounts {
    /// Transactions started, by type (in [`Transaction::ALL`] order).
    pub transactions: [u64; 5],
    /// Logical reads (accesses that do not modify the page).
    pub logical_reads: u64,
    /// Logical writes.
    pub logical_writes: u64,
    /// Physical page reads (misses).
    pub physical_reads: u64,
    /// Physical page writes (dirty evictions).
    pub physical_writes: u64,
}

/// Bytes of one index entry (key and row id).
const INDEX_ENTRY_BYTES: u64 = 16;
/// Most B-tree levels an index has (enough for 100 warehouses' order lines).
const MAX_INDEX_LEVELS: usize = 4;

/// One level of a B-tree index: its first page and the rows each page covers.
#[derive(Debug, Clone, Copy, Default)]
struct IndexLevel {
    first_page: u64,
    rows_per_page: u64,
}

/// One table: its first page, rows per page and rows per warehouse (or in
/// all), and the B-tree on its key, root first (`index_levels` of them).
#[derive(Debug, Clone, Copy)]
struct Table {
    first_page: u64,
    rows_per_page: u64,
    rows_per_warehouse: u64,
    index: [IndexLevel; MAX_INDEX_LEVELS],
    index_levels: usize,
}

impl Table {
    fn row_index(&self, warehouse: u32, row: u64) -> u64 {
        debug_assert!(row < self.rows_per_warehouse, "row within the warehouse's rows");
        u64::from(warehouse) * self.rows_per_warehouse + row
    }

    fn page(&self, warehouse: u32, row: u64) -> u64 {
        self.first_page + self.row_index(warehouse, row) / self.rows_per_page
    }

    fn pages(&self, warehouses: u64) -> u64 {
        (warehouses * self.rows_per_warehouse).div_ceil(self.rows_per_page)
    }

    /// A keyed access to a row: the index path from the root (its leaf
    /// modified when a row is inserted or deleted), then the row's page.
    fn access(&self, warehouse: u32, row: u64, access: RowAccess, add: &mut impl FnMut(u64, bool)) {
        let index = self.row_index(warehouse, row);
        for (level, entry) in self.index[..self.index_levels].iter().enumerate() {
            let leaf = level + 1 == self.index_levels;
            add(entry.first_page + index / entry.rows_per_page, leaf && access == RowAccess::InsertOrDelete);
        }
        add(self.page(warehouse, row), access != RowAccess::Read);
    }
}

/// What a transaction does to a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowAccess {
    /// Reads it.
    Read,
    /// Modifies columns outside the key.
    Update,
    /// Inserts or deletes it (its index leaf changes too).
    InsertOrDelete,
}

/// Districts per warehouse, customers per district, items (TPC-C §1.4).
const DISTRICTS: u32 = 10;
const CUSTOMERS_PER_DISTRICT: u32 = 3000;
const ITEMS: u32 = 100_000;
/// Orders kept per district (the initial 3,000), lines per order slot.
const ORDERS_PER_DISTRICT: u64 = 3000;
const LINE_SLOTS_PER_ORDER: u64 = 15;
/// New-order rows kept per district (the initial 900).
const NEW_ORDERS_PER_DISTRICT: u64 = 900;
/// Stock-Level examines the lines of this many recent orders.
const STOCK_LEVEL_ORDERS: u32 = 20;

/// Row sizes, bytes (approximate, TPC-C §1.3).
const WAREHOUSE_ROW: u64 = 89;
const DISTRICT_ROW: u64 = 95;
const CUSTOMER_ROW: u64 = 655;
const HISTORY_ROW: u64 = 46;
const NEW_ORDER_ROW: u64 = 8;
const ORDER_ROW: u64 = 24;
const ORDER_LINE_ROW: u64 = 54;
const ITEM_ROW: u64 = 82;
const STOCK_ROW: u64 = 306;

/// The database's tables.
#[derive(Debug, Clone, Copy)]
struct Tables {
    warehouse: Table,
    district: Table,
    customer: Table,
    history: Table,
    new_order: Table,
    orders: Table,
    order_line: Table,
    item: Table,
    stock: Table,
    page_count: u64,
}

impl Tables {
    fn new(spec: &TpccSpec) -> Tables {
        let usable = (spec.page_bytes as f64 * spec.fill_factor).floor() as u64;
        let warehouses = u64::from(spec.warehouses);
        let districts = u64::from(DISTRICTS);
        let mut next_page = 0;
        let fan_out = usable / INDEX_ENTRY_BYTES;
        let mut table = |row_bytes: u64, rows_per_warehouse: u64, shared: bool, indexed: bool| {
            assert!(usable >= row_bytes, "a page holds a row");
            let mut table = Table {
                first_page: next_page,
                rows_per_page: usable / row_bytes,
                rows_per_warehouse,
                index: [IndexLevel::default(); MAX_INDEX_LEVELS],
                index_levels: 0,
            };
            let table_warehouses = if shared { 1 } else { warehouses };
            let rows = table_warehouses * rows_per_warehouse;
            next_page += table.pages(table_warehouses);
            if indexed {
                // Leaves first, then each level above, up to a single root.
                let mut levels = Vec::new();
                let mut rows_per_page = fan_out;
                loop {
                    let pages = rows.div_ceil(rows_per_page);
                    levels.push(IndexLevel { first_page: next_page, rows_per_page });
                    next_page += pages;
                    if pages == 1 {
                        break;
                    }
                    rows_per_page *= fan_out;
                }
                assert!(levels.len() <= MAX_INDEX_LEVELS, "the index fits its levels");
                table.index_levels = levels.len();
                for (slot, level) in levels.into_iter().rev().enumerate() {
                    table.index[slot] = level;
                }
            }
            table
        };
        let item = table(ITEM_ROW, u64::from(ITEMS), true, true);
        let warehouse = table(WAREHOUSE_ROW, 1, false, true);
        let district = table(DISTRICT_ROW, districts, false, true);
        let customer = table(CUSTOMER_ROW, districts * u64::from(CUSTOMERS_PER_DISTRICT), false, true);
        let history = table(HISTORY_ROW, districts * u64::from(CUSTOMERS_PER_DISTRICT), false, false);
        let new_order = table(NEW_ORDER_ROW, districts * NEW_ORDERS_PER_DISTRICT, false, true);
        let orders = table(ORDER_ROW, districts * ORDERS_PER_DISTRICT, false, true);
        let order_line = table(ORDER_LINE_ROW, districts * ORDERS_PER_DISTRICT * LINE_SLOTS_PER_ORDER, false, true);
        let stock = table(STOCK_ROW, u64::from(ITEMS), false, true);
        Tables {
            warehouse,
            district,
            customer,
            history,
            new_order,
            orders,
            order_line,
            item,
            stock,
            page_count: next_page,
        }
    }
}

/// SplitMix64's output function: a well-mixed 64-bit hash.
fn split_mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One user's state: its random stream and its transaction's remaining accesses.
#[derive(Debug, Clone)]
struct User {
    rng: ChaCha8Rng,
    /// Remaining accesses of the transaction under way, next last.
    pending: Vec<LogicalAccess>,
}

/// Per-district order counters, shared by the users.
#[derive(Debug, Clone, Copy, Default)]
struct DistrictOrders {
    next_order: u64,
    next_delivery: u64,
    next_history: u64,
}

/// The TPC-C-like workload. See the module's documentation.
#[derive(Debug, Clone)]
pub struct TpccWorkload {
    spec: TpccSpec,
    tables: Tables,
    pool: BufferPool,
    users: Vec<User>,
    districts: Vec<DistrictOrders>,
    /// NURand's run-time constants C for customer ids and item ids (§2.1.6).
    customer_constant: u64,
    item_constant: u64,
    counts: TpccCounts,
}

impl TpccWorkload {
    /// A workload; panics on a spec with no warehouse, user or frame.
    pub fn new(spec: TpccSpec) -> TpccWorkload {
        assert!(spec.warehouses > 0 && spec.users > 0, "warehouses and users");
        assert!(spec.fill_factor > 0.0 && spec.fill_factor <= 1.0, "a fill factor in (0, 1]");
        let tables = Tables::new(&spec);
        let frames = u32::try_from(spec.buffer_pool_bytes / spec.page_bytes).expect("frames fit u32");
        let mut constants = seeded_stream(spec.seed, u64::from(spec.users));
        let districts = (0..spec.warehouses * DISTRICTS)
            .map(|_| DistrictOrders {
                next_order: ORDERS_PER_DISTRICT,
                next_delivery: ORDERS_PER_DISTRICT - NEW_ORDERS_PER_DISTRICT,
                next_history: 0,
            })
            .collect();
        TpccWorkload {
            spec,
            pool: BufferPool::new(frames, tables.page_count),
            tables,
            users: (0..spec.users)
                .map(|user| User { rng: seeded_stream(spec.seed, u64::from(user)), pending: Vec::new() })
                .collect(),
            districts,
            customer_constant: constants.gen_range(0..1024),
            item_constant: constants.gen_range(0..8192),
            counts: TpccCounts::default(),
        }
    }

    /// The spec.
    pub fn spec(&self) -> &TpccSpec {
        &self.spec
    }

    /// Pages in the database.
    pub fn page_count(&self) -> u64 {
        self.tables.page_count
    }

    /// The database's size, bytes.
    pub fn database_bytes(&self) -> u64 {
        self.tables.page_count * self.spec.page_bytes
    }

    /// Counts so far.
    pub fn counts(&self) -> TpccCounts {
        self.counts
    }

    /// Starts counting afresh (after a warm-up); the pool keeps its pages.
    pub fn reset_counts(&mut self) {
        self.counts = TpccCounts::default();
    }

    /// The next access of `user` (below [`TpccSpec::users`]) and the I/Os it costs.
    pub fn next_step(&mut self, user: u32) -> UserStep {
        let user = user as usize;
        if self.users[user].pending.is_empty() {
            self.start_transaction(user);
        }
        let access = self.users[user].pending.pop().expect("a transaction has accesses");
        if access.write {
            self.counts.logical_writes += 1;
        } else {
            self.counts.logical_reads += 1;
        }
        let mut ios = Vec::new();
        self.pool.access(access.page, access.write, &mut ios);
        for io in &ios {
            match io.operation {
                Operation::Read => self.counts.physical_reads += 1,
                _ => self.counts.physical_writes += 1,
            }
        }
        UserStep { access, ios }
    }

    fn start_transaction(&mut self, user: usize) {
        let roll = self.users[user].rng.gen_range(0..100);
        let kind = match roll {
            0..45 => Transaction::NewOrder,
            45..88 => Transaction::Payment,
            88..92 => Transaction::OrderStatus,
            92..96 => Transaction::Delivery,
            _ => Transaction::StockLevel,
        };
        self.counts.transactions[kind.index()] += 1;
        let mut accesses = Vec::new();
        let mut add = |page: u64, write: bool| accesses.push(LogicalAccess { page, write, transaction: kind });
        let warehouse = self.users[user].rng.gen_range(0..self.spec.warehouses);
        let district = self.users[user].rng.gen_range(0..DISTRICTS);
        match kind {
            Transaction::NewOrder => self.new_order(user, warehouse, district, &mut add),
            Transaction::Payment => self.payment(user, warehouse, district, &mut add),
            Transaction::OrderStatus => self.order_status(user, warehouse, district, &mut add),
            Transaction::Delivery => self.delivery(user, warehouse, &mut add),
            Transaction::StockLevel => self.stock_level(warehouse, district, &mut add),
        }
        accesses.reverse();
        self.users[user].pending = accesses;
    }

    /// NURand(A, x, y) of TPC-C §2.1.6 with the constant `c`.
    fn nurand(rng: &mut ChaCha8Rng, a: u64, c: u64, x: u64, y: u64) -> u64 {
        (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
    }

    fn customer_row(&mut self, user: usize, district: u32) -> u64 {
        let customer = Self::nurand(&mut self.users[user].rng, 1023, self.customer_constant, 1, 3000) - 1;
        u64::from(district) * u64::from(CUSTOMERS_PER_DISTRICT) + customer
    }

    /// The item of line `line` of order `order` of a district: NURand over
    /// a hash of the line's key and the seed, so that later transactions
    /// find the same items without storing them.
    fn order_line_item(&self, district_index: usize, order: u64, line: u64) -> u64 {
        let key = (district_index as u64) << 40 | (order << 4) | line;
        let first = split_mix(self.spec.seed ^ key);
        let second = split_mix(first);
        let items = u64::from(ITEMS);
        (((first % 8192) | (second % items)) + self.item_constant) % items
    }

    fn order_line_count(&self, district_index: usize, order: u64) -> u64 {
        5 + (order.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ district_index as u64) % 11
    }

    fn district_index(&self, warehouse: u32, district: u32) -> usize {
        (warehouse * DISTRICTS + district) as usize
    }

    fn order_line_row(district: u32, order: u64, line: u64) -> u64 {
        let slot = (order % ORDERS_PER_DISTRICT) * LINE_SLOTS_PER_ORDER + line;
        u64::from(district) * ORDERS_PER_DISTRICT * LINE_SLOTS_PER_ORDER + slot
    }

    fn order_row(district: u32, order: u64) -> u64 {
        u64::from(district) * ORDERS_PER_DISTRICT + order % ORDERS_PER_DISTRICT
    }

    fn new_order_row(district: u32, order: u64) -> u64 {
        u64::from(district) * NEW_ORDERS_PER_DISTRICT + order % NEW_ORDERS_PER_DISTRICT
    }

    fn new_order(&mut self, user: usize, warehouse: u32, district: u32, add: &mut impl FnMut(u64, bool)) {
        let tables = self.tables;
        let index = self.district_index(warehouse, district);
        tables.warehouse.access(warehouse, 0, RowAccess::Read, add);
        tables.district.access(warehouse, u64::from(district), RowAccess::Update, add);
        let customer = self.customer_row(user, district);
        tables.customer.access(warehouse, customer, RowAccess::Read, add);
        let order = self.districts[index].next_order;
        self.districts[index].next_order += 1;
        tables.orders.access(warehouse, Self::order_row(district, order), RowAccess::InsertOrDelete, add);
        tables.new_order.access(warehouse, Self::new_order_row(district, order), RowAccess::InsertOrDelete, add);
        for line in 0..self.order_line_count(index, order) {
            let item = self.order_line_item(index, order, line);
            tables.item.access(0, item, RowAccess::Read, add);
            let remote = self.spec.warehouses > 1 && self.users[user].rng.gen_bool(0.01);
            let supplier = if remote { self.other_warehouse(user, warehouse) } else { warehouse };
            tables.stock.access(supplier, item, RowAccess::Update, add);
            let row = Self::order_line_row(district, order, line);
            tables.order_line.access(warehouse, row, RowAccess::InsertOrDelete, add);
        }
    }

    fn other_warehouse(&mut self, user: usize, warehouse: u32) -> u32 {
        let other = self.users[user].rng.gen_range(0..self.spec.warehouses - 1);
        if other >= warehouse {
            other + 1
        } else {
            other
        }
    }

    /// Chooses a customer; by last name (60 %) the customers sharing the
    /// name are read first, about two more rows.
    fn choose_customer(&mut self, user: usize, warehouse: u32, district: u32, add: &mut impl FnMut(u64, bool)) -> u64 {
        let by_name = self.users[user].rng.gen_bool(0.6);
        let customer = self.customer_row(user, district);
        if by_name {
            for _ in 0..2 {
                let namesake = self.customer_row(user, district);
                self.tables.customer.access(warehouse, namesake, RowAccess::Read, add);
            }
        }
        customer
    }

    fn payment(&mut self, user: usize, warehouse: u32, district: u32, add: &mut impl FnMut(u64, bool)) {
        let tables = self.tables;
        tables.warehouse.access(warehouse, 0, RowAccess::Update, add);
        tables.district.access(warehouse, u64::from(district), RowAccess::Update, add);
        let remote = self.spec.warehouses > 1 && self.users[user].rng.gen_bool(0.15);
        let (customer_warehouse, customer_district) = if remote {
            (self.other_warehouse(user, warehouse), self.users[user].rng.gen_range(0..DISTRICTS))
        } else {
            (warehouse, district)
        };
        let customer = self.choose_customer(user, customer_warehouse, customer_district, add);
        tables.customer.access(customer_warehouse, customer, RowAccess::Update, add);
        let index = self.district_index(warehouse, district);
        let history = self.districts[index].next_history;
        self.districts[index].next_history += 1;
        let rows_per_district = u64::from(CUSTOMERS_PER_DISTRICT);
        let row = u64::from(district) * rows_per_district + history % rows_per_district;
        tables.history.access(warehouse, row, RowAccess::InsertOrDelete, add);
    }

    fn order_status(&mut self, user: usize, warehouse: u32, district: u32, add: &mut impl FnMut(u64, bool)) {
        let tables = self.tables;
        let customer = self.choose_customer(user, warehouse, district, add);
        tables.customer.access(warehouse, customer, RowAccess::Read, add);
        let index = self.district_index(warehouse, district);
        let order = self.districts[index].next_order - 1 - self.users[user].rng.gen_range(0..10);
        tables.orders.access(warehouse, Self::order_row(district, order), RowAccess::Read, add);
        for line in 0..self.order_line_count(index, order) {
            tables.order_line.access(warehouse, Self::order_line_row(district, order, line), RowAccess::Read, add);
        }
    }

    fn delivery(&mut self, user: usize, warehouse: u32, add: &mut impl FnMut(u64, bool)) {
        let tables = self.tables;
        for district in 0..DISTRICTS {
            let index = self.district_index(warehouse, district);
            let orders = self.districts[index];
            if orders.next_delivery >= orders.next_order {
                continue;
            }
            let order = orders.next_delivery;
            self.districts[index].next_delivery += 1;
            let new_order_row = Self::new_order_row(district, order);
            tables.new_order.access(warehouse, new_order_row, RowAccess::InsertOrDelete, add);
            tables.orders.access(warehouse, Self::order_row(district, order), RowAccess::Update, add);
            for line in 0..self.order_line_count(index, order) {
                let row = Self::order_line_row(district, order, line);
                tables.order_line.access(warehouse, row, RowAccess::Update, add);
            }
            let customer = self.customer_row(user, district);
            tables.customer.access(warehouse, customer, RowAccess::Update, add);
        }
    }

    fn stock_level(&mut self, warehouse: u32, district: u32, add: &mut impl FnMut(u64, bool)) {
        let tables = self.tables;
        tables.district.access(warehouse, u64::from(district), RowAccess::Read, add);
        let index = self.district_index(warehouse, district);
        let last = self.districts[index].next_order;
        let mut items = Vec::new();
        for order in last.saturating_sub(u64::from(STOCK_LEVEL_ORDERS))..last {
            for line in 0..self.order_line_count(index, order) {
                tables.order_line.access(warehouse, Self::order_line_row(district, order, line), RowAccess::Read, add);
                items.push(self.order_line_item(index, order, line));
            }
        }
        items.sort_unstable();
        items.dedup();
        for item in items {
            tables.stock.access(warehouse, item, RowAccess::Read, add);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> TpccSpec {
        TpccSpec { warehouses: 2, page_bytes: 4096, buffer_pool_bytes: 8 << 20, users: 4, fill_factor: 0.8, seed }
    }

    fn run(workload: &mut TpccWorkload, steps: u64) -> Vec<UserStep> {
        let users = workload.spec().users;
        (0..steps).map(|step| workload.next_step((step % u64::from(users)) as u32)).collect()
    }

    #[test]
    fn pages_stay_inside_the_database_and_tables_do_not_overlap() {
        let mut workload = TpccWorkload::new(small(3));
        let pages = workload.page_count();
        for step in run(&mut workload, 200_000) {
            assert!(step.access.page < pages);
        }
        let tables = workload.tables;
        let ordered = [
            tables.item,
            tables.warehouse,
            tables.district,
            tables.customer,
            tables.history,
            tables.new_order,
            tables.orders,
            tables.order_line,
            tables.stock,
        ];
        for (table, next) in ordered.iter().zip(ordered.iter().skip(1)) {
            let warehouses = if table.first_page == 0 { 1 } else { 2 };
            let data_end = table.first_page + table.pages(warehouses);
            let index_end = table.index[..table.index_levels]
                .iter()
                .map(|level| level.first_page + (warehouses * table.rows_per_warehouse).div_ceil(level.rows_per_page))
                .max()
                .unwrap_or(data_end);
            assert!(index_end.max(data_end) == next.first_page, "tables and their indexes are contiguous");
            assert!(table.index_levels == 0 || table.index[0].rows_per_page >= warehouses * table.rows_per_warehouse);
        }
        assert_eq!(tables.history.index_levels, 0, "history has no index");
    }

    #[test]
    fn the_mix_and_the_seed_hold() {
        let mut workload = TpccWorkload::new(small(5));
        let steps = run(&mut workload, 300_000);
        let counts = workload.counts();
        let total: u64 = counts.transactions.iter().sum();
        let share = |kind: Transaction| counts.transactions[kind.index()] as f64 / total as f64;
        assert!((share(Transaction::NewOrder) - 0.45).abs() < 0.03, "{counts:?}");
        assert!((share(Transaction::Payment) - 0.43).abs() < 0.03, "{counts:?}");
        let mut again = TpccWorkload::new(small(5));
        assert_eq!(steps, run(&mut again, 300_000), "the same seed, the same accesses");
        let mut other = TpccWorkload::new(small(6));
        assert_ne!(steps[..1000], run(&mut other, 1000)[..]);
    }
}
