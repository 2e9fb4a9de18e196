//! Typed map handles, in the manner of aya's `Array<T>` / `HashMap<K, V>`: the key and value
//! sizes are checked once, when the wrapper is made from a map (a skeleton's or a pin's), and
//! every access then takes and returns the `#[repr(C)]` Pod structs of [`crate::abi`] (through
//! bytemuck), never byte slices with offsets.

use std::marker::PhantomData;
use std::os::fd::AsFd;

use bytemuck::{cast_slice, Pod};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::BpfError;

/// Checks that `map` has keys of `key` bytes and values of `value` bytes.
fn check_shape(map: &MapHandle, name: &'static str, key: usize, value: usize) -> Result<(), BpfError> {
    let (k, v) = (map.key_size() as usize, map.value_size() as usize);
    if k != key || v != value {
        return Err(BpfError::MapShape { map: name, key: k, value: v, want_key: key, want_value: value });
    }
    Ok(())
}

macro_rules! debug_by_name {
    ($($t:ident<$($p:ident),*>),*) => {$(
        impl<$($p),*> std::fmt::Debug for $t<$($p),*> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).field("name", &self.name).finish_non_exhaustive()
            }
        }
    )*};
}
debug_by_name!(Array<V>, PerCpuArray<V>, HashMap<K, V>);

fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |cause| BpfError::Map { map, cause }
}

/// A map keyed by u32 index (ARRAY, and the XSKMAP / CPUMAP / DEVMAP arrays), values `V`.
pub struct Array<V> {
    map: MapHandle,
    name: &'static str,
    _v: PhantomData<V>,
}

impl<V: Pod> Array<V> {
    /// Wraps `map`, named `name` in errors.
    ///
    /// # Errors
    ///
    /// [`BpfError::MapShape`] unless its keys are 4 bytes and its values `size_of::<V>()`.
    pub fn new(map: MapHandle, name: &'static str) -> Result<Self, BpfError> {
        check_shape(&map, name, 4, size_of::<V>())?;
        Ok(Self { map, name, _v: PhantomData })
    }

    /// The value at `i` (`None` if the kernel has none there).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (e.g. `i` out of range for a map that says so).
    pub fn get(&self, i: u32) -> Result<Option<V>, BpfError> {
        let v = self.map.lookup(&i.to_ne_bytes(), MapFlags::ANY).map_err(map_err(self.name))?;
        Ok(v.and_then(|v| crate::abi::read::<V>(&v)))
    }

    /// Sets the value at `i`.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`i` out of range, or a value the kernel refuses).
    pub fn set(&self, i: u32, v: &V) -> Result<(), BpfError> {
        self.map.update(&i.to_ne_bytes(), bytemuck::bytes_of(v), MapFlags::ANY).map_err(map_err(self.name))
    }

    /// Sets `values` at consecutive indexes from `first`, with BPF_MAP_UPDATE_BATCH (kernel
    /// >= 5.6), 16,384 per system call.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn set_many(&self, first: u32, values: &[V]) -> Result<(), BpfError> {
        const CHUNK: usize = 16384;
        for (n, chunk) in values.chunks(CHUNK).enumerate() {
            let start = first + (n * CHUNK) as u32;
            let keys: Vec<u32> = (start..start + chunk.len() as u32).collect();
            self.map
                .update_batch(cast_slice(&keys), cast_slice(chunk), chunk.len() as u32, MapFlags::ANY, MapFlags::ANY)
                .map_err(map_err(self.name))?;
        }
        Ok(())
    }

    /// The map's kernel id.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn id(&self) -> Result<u32, BpfError> {
        Ok(self.map.info().map_err(map_err(self.name))?.info.id)
    }

    /// The handle (its descriptor).
    #[cfg(feature = "classifier")]
    pub(crate) fn handle(&self) -> &MapHandle {
        &self.map
    }

    /// The handle, to pin it.
    #[cfg(feature = "classifier")]
    pub(crate) fn handle_mut(&mut self) -> &mut MapHandle {
        &mut self.map
    }
}

/// A per-CPU array (PERCPU_ARRAY) of `V`, one value per possible CPU at each index.
pub struct PerCpuArray<V> {
    map: MapHandle,
    name: &'static str,
    _v: PhantomData<V>,
}

impl<V: Pod> PerCpuArray<V> {
    /// Wraps `map`, named `name` in errors.
    ///
    /// # Errors
    ///
    /// [`BpfError::MapShape`] unless its keys are 4 bytes and its values `size_of::<V>()`.
    pub fn new(map: MapHandle, name: &'static str) -> Result<Self, BpfError> {
        check_shape(&map, name, 4, size_of::<V>())?;
        Ok(Self { map, name, _v: PhantomData })
    }

    /// The values at `i`, one per CPU (empty if the kernel has none).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn get(&self, i: u32) -> Result<Vec<V>, BpfError> {
        let v = self.map.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY).map_err(map_err(self.name))?;
        Ok(v.unwrap_or_default().iter().filter_map(|c| crate::abi::read::<V>(c)).collect())
    }

    /// Zeroes indexes `first..first + n` on every CPU with BPF_MAP_UPDATE_BATCH (kernel >= 5.6),
    /// one system call per 8,192 indexes.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] if the CPU count cannot be read, [`BpfError::Sys`] for the batch.
    pub fn zero(&self, first: u32, n: u32) -> Result<(), BpfError> {
        if n == 0 {
            return Ok(());
        }
        // The kernel copies one value per possible CPU: a wrong count would make it read past
        // the buffer, so no fallback here.
        let ncpu = libbpf_rs::num_possible_cpus().map_err(map_err(self.name))?;
        let vlen = size_of::<V>().next_multiple_of(8) * ncpu;
        const CHUNK: u32 = 8192;
        let zeros = vec![0u8; vlen * CHUNK.min(n) as usize];
        let name = self.name;
        for start in (0..n).step_by(CHUNK as usize) {
            let end = (start + CHUNK).min(n);
            let keys: Vec<u32> = (first + start..first + end).collect();
            crate::sys::bpf::map_update_batch(
                self.map.as_fd(),
                cast_slice(&keys),
                4,
                &zeros,
                vlen,
                end - start,
                || format!("{name}, keys {}..{}", first + start, first + end),
            )?;
        }
        Ok(())
    }

    /// The handle (its descriptor).
    #[cfg(feature = "classifier")]
    pub(crate) fn handle(&self) -> &MapHandle {
        &self.map
    }

    /// The handle, to pin it.
    #[cfg(feature = "classifier")]
    pub(crate) fn handle_mut(&mut self) -> &mut MapHandle {
        &mut self.map
    }
}

/// A hash map (HASH, LRU_HASH) of `K` to `V`.
pub struct HashMap<K, V> {
    map: MapHandle,
    name: &'static str,
    _kv: PhantomData<(K, V)>,
}

impl<K: Pod, V: Pod> HashMap<K, V> {
    /// Wraps `map`, named `name` in errors.
    ///
    /// # Errors
    ///
    /// [`BpfError::MapShape`] unless its keys are `size_of::<K>()` and its values
    /// `size_of::<V>()` bytes.
    pub fn new(map: MapHandle, name: &'static str) -> Result<Self, BpfError> {
        check_shape(&map, name, size_of::<K>(), size_of::<V>())?;
        Ok(Self { map, name, _kv: PhantomData })
    }

    /// Inserts `keys[i] -> values[i]` with BPF_MAP_UPDATE_BATCH (kernel >= 5.6), 8,192 per
    /// system call.
    ///
    /// # Errors
    ///
    /// [`BpfError::BadValue`] if the slices differ in length; [`BpfError::Map`] (e.g. E2BIG
    /// when the map is full).
    pub fn set_many(&self, keys: &[K], values: &[V]) -> Result<(), BpfError> {
        if keys.len() != values.len() {
            return Err(BpfError::BadValue {
                what: "batch",
                value: format!("{} keys, {} values", keys.len(), values.len()),
                accepted: "as many keys as values".into(),
            });
        }
        const CHUNK: usize = 8192;
        for (k, v) in keys.chunks(CHUNK).zip(values.chunks(CHUNK)) {
            self.map
                .update_batch(cast_slice(k), cast_slice(v), k.len() as u32, MapFlags::ANY, MapFlags::ANY)
                .map_err(map_err(self.name))?;
        }
        Ok(())
    }

    /// Every key, read with BPF_MAP_LOOKUP_BATCH (kernel >= 5.6), 8,192 per system call.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn keys(&self) -> Result<Vec<K>, BpfError> {
        let batch = self.map.lookup_batch(8192, MapFlags::ANY, MapFlags::ANY).map_err(map_err(self.name))?;
        Ok(batch.filter_map(|(k, _)| crate::abi::read::<K>(&k)).collect())
    }

    /// Deletes `keys` with BPF_MAP_DELETE_BATCH, 8,192 per system call; keys already gone are
    /// no error (a batch that meets one finishes one key at a time).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`].
    pub fn delete_many(&self, keys: &[K]) -> Result<(), BpfError> {
        for chunk in keys.chunks(8192) {
            if let Err(cause) =
                self.map.delete_batch(cast_slice(chunk), chunk.len() as u32, MapFlags::ANY, MapFlags::ANY)
            {
                if cause.kind() != libbpf_rs::ErrorKind::NotFound {
                    return Err(BpfError::Map { map: self.name, cause });
                }
                for k in chunk {
                    match self.map.delete(bytemuck::bytes_of(k)) {
                        Err(cause) if cause.kind() != libbpf_rs::ErrorKind::NotFound => {
                            return Err(BpfError::Map { map: self.name, cause })
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// The handle (to reuse the map in another program).
    #[cfg(feature = "classifier")]
    pub(crate) fn handle(&self) -> &MapHandle {
        &self.map
    }

    /// The handle, to pin it.
    #[cfg(feature = "classifier")]
    pub(crate) fn handle_mut(&mut self) -> &mut MapHandle {
        &mut self.map
    }
}
