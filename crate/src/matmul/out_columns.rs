//! Where one parallel task's outputs land: some columns of every row of a row-major output.
//! Tasks of one call own disjoint column ranges of the same rows, which `&mut` slices cannot
//! express (each task's columns interleave with the others' in memory), so they write through
//! a raw pointer; writing in place spares each task a buffer of its own and the copy back.

/// `rows × cols` values, value `(r, c)` at `ptr + r * stride + c`.
#[derive(Clone, Copy)]
pub struct OutColumns {
    ptr: *mut f32,
    stride: usize,
    rows: usize,
    cols: usize,
}

// SAFETY: an `OutColumns` is only a window; callers hand tasks disjoint windows (`columns` with
// ranges no other task gets), so values are never written from two threads, and the memory
// outlives the parallel region (see `whole`).
unsafe impl Send for OutColumns {}
unsafe impl Sync for OutColumns {}

impl OutColumns {
    /// All of `out`, read as `rows × cols`. The window must not outlive `out`'s allocation, nor
    /// be used while `out` is otherwise borrowed: the caller keeps it inside one call.
    pub fn whole(out: &mut [f32], rows: usize, cols: usize) -> Self {
        Self::over(out.as_mut_ptr(), out.len(), rows, cols)
    }

    /// The spare capacity of a vector about to hold `rows × cols` values; the caller sets its
    /// length once every value has been written.
    pub fn spare(out: &mut [std::mem::MaybeUninit<f32>], rows: usize, cols: usize) -> Self {
        Self::over(out.as_mut_ptr().cast(), out.len(), rows, cols)
    }

    fn over(ptr: *mut f32, len: usize, rows: usize, cols: usize) -> Self {
        assert!(len >= rows * cols, "output of {len} values cannot hold {rows} × {cols}");
        Self { ptr, stride: cols, rows, cols }
    }

    /// Columns `first..last` of this window.
    pub fn columns(&self, first: usize, last: usize) -> Self {
        assert!(first <= last && last <= self.cols, "columns {first}..{last} outside {}", self.cols);
        // wrapping_add: no dereference here, and `first <= cols` keeps it inside the window.
        Self { ptr: self.ptr.wrapping_add(first), stride: self.stride, rows: self.rows, cols: last - first }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn stride(&self) -> usize {
        self.stride
    }

    pub fn as_mut_ptr(&self) -> *mut f32 {
        self.ptr
    }

    /// Sets value `(row, col)`.
    ///
    /// # Safety
    /// No other thread may write the same value at the same time: the window must be this
    /// task's own (from `columns` with a range no other task got).
    #[inline]
    pub unsafe fn set(&self, row: usize, col: usize, value: f32) {
        assert!(row < self.rows && col < self.cols, "({row}, {col}) outside {} × {}", self.rows, self.cols);
        self.ptr.add(row * self.stride + col).write(value);
    }

    /// Sets values `(row, col..col + values.len())`, one bounds check for the run.
    ///
    /// # Safety
    /// As `set`.
    #[inline]
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    pub unsafe fn set_run(&self, row: usize, col: usize, values: &[f32]) {
        assert!(
            row < self.rows && col + values.len() <= self.cols,
            "({row}, {col}..+{}) outside {} × {}",
            values.len(),
            self.rows,
            self.cols
        );
        std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(row * self.stride + col), values.len());
    }
}
