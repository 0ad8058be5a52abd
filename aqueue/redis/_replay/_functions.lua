-- aqueue's replay tables on the server: the third part of the `aqueue` function library
-- (aqueue/redis/_core/_library.py loads it after the core part, whose helpers it uses:
-- now_ms, prefix, del_all, inline, closed_now, producers_op, WAKE_TTL, and after the
-- queues' part). One concept, the table engine on the server (limiter, sum trees,
-- selectors, waiters, producers): its length (about a thousand lines) is a second
-- engine, kept whole. Every state change of a table is one of these functions, so it is
-- atomic: the rate limiter's counters move in the same step as the selection, the
-- eviction and the payloads. Keys (P = "aq:{name}:", KEYS[1] = P.."meta"):
--   meta     hash: gen kind='table' max_size dtypes shapes names sampler remover mts
--            limiter format (the settings, compared on reopen), spi min_size lo hi
--            skind sexp rkind rexp fanout order maxheap (the same, as this file reads
--            them), closed, the counters next_key inserts samples deletes evictions sl
--            seq arr, and the wait clocks iw_tot iw_since sw_tot sw_since (us)
--   it       hash key -> record: struct '<ddddB' priority, times sampled, seq, pos,
--            inline (1: the payload is pl[key], 0: it is the string d:<key>)
--   d:<key>  the payload of an item of 1 KiB or more; it never passes through Lua
--   pl       hash key -> the payload of a smaller item
--   st:<ref> a payload staged by an insert's MULTI (MSET), in the same transaction as the
--            rt_insert that renames it to d:<key> or deletes it
--   o:<w>.<j> the j-th payload of sample w, COPYed from d:<key> by rt_sample, read by the
--            MGET and deleted by the DEL queued behind it in the same MULTI/EXEC
--   dense    hash pos -> key, pos = 0 .. size-1: the items in a dense order (a removal
--            moves the last ones into the holes); a Uniform draw picks a pos
--   t:<tree>:<j>  level j of a sum tree (one per distinct Prioritized exponent, 's' for
--            the sampler's, 'r' for a remover's of another exponent): float64 nodes in a
--            string (SETRANGE/GETRANGE); level 0 holds max_size leaves, leaf pos =
--            priority^exponent of the item at pos (0 for no item), each node of level
--            j+1 is the sum of its `fanout` children of level j; the top level has one
--            node, the total
--   pz       zset seq:key -> priority, every item: the largest priority (the default of
--            an insert), MinHeap order (ties: the smallest seq, set longest ago)
--   pzn      zset seq:key -> -priority, with a MaxHeap selector: MaxHeap order
--   ko       zset key -> key, with a Fifo or Lifo selector: key order
--   wi, ws   zsets "<need>:<wid>" -> arrival number: the inserts and the samples waiting,
--            oldest first; wi:dl, ws:dl the same members -> deadline (ms)
--   wk:<wid> a waiter's wake-up list (BLPOP), short TTL
--   producers zset producer id -> deadline (refreshed by its process's heartbeat)
--   hold     hash wid -> the keys drawn by a sharded sample's rt_hold (struct '<d' each),
--            not counted yet: rt_commit counts them, rt_release (or the lease's end,
--            hold:dl: wid -> deadline ms) forgets them; meta 'held' is their number
-- Invariants: size = inserts - deletes = HLEN it = HLEN dense; every held key has one
-- record, one dense pos (record.pos), one pz member (its seq), one ko/pzn member when
-- kept, and its payload (d:<key> or pl[key]); nothing else holds a payload key but a
-- transaction in flight (st:, o:); sl = the sum of the records' times (kept with
-- max_times_sampled); a node of a sum tree is the sum of its children as stored
-- (recomputed, never adjusted by a delta: no drift). Only the oldest waiter of a
-- direction may complete (arrival order, across processes); after every change the
-- oldest of each direction is woken if it can now progress (or the table is closed),
-- and a waiter that leaves passes that on. A waiter's registration expires unless its
-- retries refresh it (a crashed one's goes after its deadline). Random numbers come
-- from the caller (ARGV), so a seeded client makes a table deterministic.

local RT_REC = '<ddddB'
local RT_FIELDS = {'gen', 'kind', 'max_size', 'mts', 'closed', 'spi', 'min_size', 'lo', 'hi',
  'skind', 'sexp', 'rkind', 'rexp', 'fanout', 'next_key', 'inserts', 'samples', 'deletes',
  'evictions', 'sl', 'seq', 'arr', 'order', 'maxheap', 'held'}
-- A trajectory table (kind 'traj', trajectory/_functions.lua) is a replay table whose items are
-- windows of steps: its part fills these hooks, which see every item leave (left) and
-- the table dropped (drop).
local RT_HOOKS = {}
local SMALL_LEVEL = 2048  -- tree levels of at most this many nodes are read whole, once a call

local function istr(n) return string.format('%d', n) end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fstr(x) return string.format('%.17g', x) end
local function num(s)
  if s == 'inf' then return math.huge end
  if s == '-inf' then return -math.huge end
  return tonumber(s)
end

-- Commands with many arguments, in chunks (Lua's C stack caps unpack()).
local function call_pairs(cmd, key, list)
  local i = 1
  while i <= #list do
    local j = math.min(#list, i + 999)
    redis.call(cmd, key, unpack(list, i, j))
    i = j + 1
  end
end

local function hmget_all(key, fields)
  local out, i = {}, 1
  while i <= #fields do
    local j = math.min(#fields, i + 999)
    local part = redis.call('HMGET', key, unpack(fields, i, j))
    for x = 1, #part do out[#out + 1] = part[x] end
    i = j + 1
  end
  return out
end

local function zmember(seq, key) return string.format('%015d', seq) .. ':' .. istr(key) end
local function zkey(m) return tonumber(string.sub(m, 17)) end

-- -- loading and saving ---------------------------------------------------------------

local function rt_load(keys, gen)
  local meta = keys[1]
  local m = redis.call('HMGET', meta, unpack(RT_FIELDS))
  if m[1] ~= gen or (m[2] ~= 'table' and m[2] ~= 'traj') then return nil end
  local t = {meta = meta, P = prefix(meta), max = tonumber(m[3]), mts = tonumber(m[4]),
    closed = m[5] == '1', spi = num(m[6]), min_size = tonumber(m[7]), lo = num(m[8]),
    hi = num(m[9]), F = tonumber(m[14]), next_key = tonumber(m[15]),
    inserts = tonumber(m[16]), samples = tonumber(m[17]), deletes = tonumber(m[18]),
    evictions = tonumber(m[19]), sl = tonumber(m[20]), seq = tonumber(m[21]),
    arr = tonumber(m[22]), order = m[23] == '1', maxheap = m[24] == '1', cache = {},
    held = tonumber(m[25] or '0'),
    traj = m[2] == 'traj'}
  t.size = t.inserts - t.deletes
  t.s = {kind = m[10], exp = tonumber(m[11]), tree = 's'}
  t.r = {kind = m[12], exp = tonumber(m[13]), tree = 'r'}
  t.trees = {}
  if t.s.kind == 'prioritized' then t.trees[#t.trees + 1] = t.s end
  if t.r.kind == 'prioritized' then
    if t.s.kind == 'prioritized' and t.s.exp == t.r.exp then
      t.r.tree = 's'
    else
      t.trees[#t.trees + 1] = t.r
    end
  end
  return t
end

local function rt_save(t)
  redis.call('HSET', t.meta, 'next_key', istr(t.next_key), 'inserts', istr(t.inserts),
    'samples', istr(t.samples), 'deletes', istr(t.deletes), 'evictions', istr(t.evictions),
    'sl', istr(t.sl), 'seq', istr(t.seq), 'arr', istr(t.arr), 'held', istr(t.held))
  if t.c then RT_HOOKS.save(t) end  -- (a trajectory table's steps and writers)
end

-- -- the rate limiter (Reverb's arithmetic, as aqueue/_replay/_limiter.py) ----------------

local function can_insert(t, k)
  if t.inserts + k - t.deletes <= t.min_size then return true end
  return (t.inserts + k) * t.spi - t.samples <= t.hi
end

local function can_sample(t, n)
  -- (held: the draws of sharded samples not committed yet count as samples already)
  local samples = t.samples + t.held
  if t.inserts - t.deletes < t.min_size or t.inserts * t.spi - samples - n < t.lo then
    return false
  end
  if t.mts > 0 then return t.size * t.mts - t.sl - t.held >= n end
  return t.size > 0
end

-- -- sum trees ------------------------------------------------------------------------

local function weight(p, e)
  if p == 0 then return 0 end
  if e == 1 then return p end
  return p ^ e
end

local function tree_levels(t)
  if not t.levels then
    local sizes = {t.max}
    while sizes[#sizes] > 1 do sizes[#sizes + 1] = math.ceil(sizes[#sizes] / t.F) end
    t.levels = sizes
  end
  return t.levels
end

local function tree_key(t, name, j) return t.P .. 't:' .. name .. ':' .. (j - 1) end

local function unpack_doubles(s, count)
  local out = {}
  local have = math.floor(#s / 8)
  local i = 0
  while i < have do  -- struct.unpack returns its values and the next position
    local m = math.min(have - i, 200)
    local vals = {struct.unpack('<' .. string.rep('d', m), s, i * 8 + 1)}
    for x = 1, m do out[i + x] = vals[x] end
    i = i + m
  end
  for x = have + 1, count do out[x] = 0 end  -- never written: zeros
  return out
end

-- Nodes a..b (0-based) of level j (1-based; 1 = leaves) as numbers (out[1] is node a).
local function tree_read(t, name, j, a, b)
  local sizes = tree_levels(t)
  if sizes[j] <= SMALL_LEVEL then
    local c = t.cache[name .. ':' .. j]
    if not c then
      c = unpack_doubles(redis.call('GET', tree_key(t, name, j)) or '', sizes[j])
      t.cache[name .. ':' .. j] = c
    end
    local out = {}
    for i = a, b do out[#out + 1] = c[i + 1] end
    return out
  end
  local s = redis.call('GETRANGE', tree_key(t, name, j), a * 8, b * 8 + 7)
  return unpack_doubles(s, b - a + 1)
end

-- Write values[i] at nodes of level j given by the sorted distinct indices idx[i],
-- one SETRANGE per run of consecutive indices.
local function tree_write(t, name, j, idx, values)
  t.cache[name .. ':' .. j] = nil
  local key = tree_key(t, name, j)
  local i = 1
  while i <= #idx do
    local e = i
    while e < #idx and idx[e + 1] == idx[e] + 1 do e = e + 1 end
    local parts = {}
    for x = i, e do parts[#parts + 1] = struct.pack('<d', values[x]) end
    redis.call('SETRANGE', key, idx[i] * 8, table.concat(parts))
    i = e + 1
  end
end

local function sorted_keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- Set leaves (map pos -> weight), then recompute their ancestors level by level, each
-- run of consecutive parents from one GETRANGE of their children.
local function tree_set(t, tree, leaves)
  local name = tree.tree
  local sizes = tree_levels(t)
  local idx = sorted_keys(leaves)
  if #idx == 0 then return end
  local vals = {}
  for i, p in ipairs(idx) do vals[i] = leaves[p] end
  tree_write(t, name, 1, idx, vals)
  local F = t.F
  for j = 2, #sizes do
    local parents = {}
    for _, i in ipairs(idx) do parents[math.floor(i / F)] = true end
    idx = sorted_keys(parents)
    vals = {}
    local i = 1
    while i <= #idx do
      local e = i
      while e < #idx and idx[e + 1] == idx[e] + 1 do e = e + 1 end
      local a, b = idx[i] * F, math.min((idx[e] + 1) * F, sizes[j - 1]) - 1
      local kids = tree_read(t, name, j - 1, a, b)
      for x = i, e do
        local sum, first = 0, (idx[x] - idx[i]) * F
        for c = first + 1, math.min(first + F, #kids) do sum = sum + kids[c] end
        vals[x] = sum
      end
      i = e + 1
    end
    tree_write(t, name, j, idx, vals)
  end
end

local function tree_total(t, tree)
  local sizes = tree_levels(t)
  return tree_read(t, tree.tree, #sizes, 0, 0)[1]
end

-- The leaf where u (0 <= u < total) falls: its pos and weight. Zero leaves are never
-- picked; a rounding overshoot goes to the last positive child.
local function tree_find(t, tree, u)
  local sizes = tree_levels(t)
  local F, i, w = t.F, 0, 0
  for j = #sizes, 2, -1 do
    local a = i * F
    local kids = tree_read(t, tree.tree, j - 1, a, math.min(a + F, sizes[j - 1]) - 1)
    local pick, last = nil, nil
    for c = 1, #kids do
      local v = kids[c]
      if v > 0 then
        last = c
        if u < v then
          pick = c
          break
        end
        u = u - v
      end
    end
    pick = pick or last
    i, w = a + pick - 1, kids[pick]
  end
  if #sizes == 1 then w = tree_read(t, tree.tree, 1, 0, 0)[1] end
  return i, w
end

-- -- the items --------------------------------------------------------------------------

local function rec_pack(p, times, seq, pos, inl) return struct.pack(RT_REC, p, times, seq, pos, inl) end
local function rec_unpack(s)
  local p, times, seq, pos, inl = struct.unpack(RT_REC, s)
  return p, times, seq, pos, inl
end

local function max_priority(t)
  local top = redis.call('ZRANGE', t.P .. 'pz', -1, -1, 'WITHSCORES')
  if #top == 0 then return 1.0 end
  return num(top[2])
end

-- Append items {key, p, entry} at pos size .. size+#items-1: records, dense, zsets,
-- trees, and each payload (a staged ref renamed to d:<key>, or a small one into pl).
local function rt_add(t, items)
  if #items == 0 then return end
  local P = t.P
  local recs, dense, pz, pzn, ko, pl = {}, {}, {}, {}, {}, {}
  local leaves = {}
  for _, tree in ipairs(t.trees) do leaves[tree.tree] = {} end
  for _, e in ipairs(items) do
    local pos, seq = t.size, t.seq
    t.size, t.seq = t.size + 1, t.seq + 1
    local small = inline(e.entry)
    recs[#recs + 1] = istr(e.key)
    recs[#recs + 1] = rec_pack(e.p, 0, seq, pos, small and 1 or 0)
    dense[#dense + 1] = istr(pos)
    dense[#dense + 1] = istr(e.key)
    local m = zmember(seq, e.key)
    pz[#pz + 1] = fstr(e.p)
    pz[#pz + 1] = m
    if t.maxheap then
      pzn[#pzn + 1] = fstr(-e.p)
      pzn[#pzn + 1] = m
    end
    if t.order then
      ko[#ko + 1] = istr(e.key)
      ko[#ko + 1] = istr(e.key)
    end
    if small then
      pl[#pl + 1] = istr(e.key)
      pl[#pl + 1] = e.entry
    else
      redis.call('RENAME', P .. 'st:' .. e.entry, P .. 'd:' .. istr(e.key))
    end
    for _, tree in ipairs(t.trees) do leaves[tree.tree][pos] = weight(e.p, tree.exp) end
  end
  call_pairs('HSET', P .. 'it', recs)
  call_pairs('HSET', P .. 'dense', dense)
  call_pairs('ZADD', P .. 'pz', pz)
  if t.maxheap then call_pairs('ZADD', P .. 'pzn', pzn) end
  if t.order then call_pairs('ZADD', P .. 'ko', ko) end
  if #pl > 0 then call_pairs('HSET', P .. 'pl', pl) end
  for _, tree in ipairs(t.trees) do tree_set(t, tree, leaves[tree.tree]) end
end

-- Remove held items (distinct keys): their records, zset members and payloads; the
-- last items of the dense order move into the holes below the new size (their records
-- and tree leaves with them); the leaves above it become 0. `sl` drops their times.
local function rt_remove(t, keys)
  local k = #keys
  if k == 0 then return end
  if t.traj then RT_HOOKS.left(t, keys) end
  local P = t.P
  local f = {}
  for i, key in ipairs(keys) do f[i] = istr(key) end
  local recs = hmget_all(P .. 'it', f)
  local n = t.size
  local n2 = n - k
  local gone = {}
  local fields, pz, ko, dkeys, pl = {}, {}, {}, {}, {}
  for i, key in ipairs(keys) do
    local p, times, seq, pos, inl = rec_unpack(recs[i])
    gone[pos] = true
    if t.mts > 0 then t.sl = t.sl - times end
    fields[#fields + 1] = istr(key)
    pz[#pz + 1] = zmember(seq, key)
    if t.order then ko[#ko + 1] = istr(key) end
    if inl == 1 then pl[#pl + 1] = istr(key) else dkeys[#dkeys + 1] = P .. 'd:' .. istr(key) end
  end
  local holes, from = {}, {}
  for pos in pairs(gone) do
    if pos < n2 then holes[#holes + 1] = pos end
  end
  table.sort(holes)
  for q = n2, n - 1 do
    if not gone[q] then from[#from + 1] = istr(q) end
  end
  local leaves = {}
  for _, tree in ipairs(t.trees) do
    leaves[tree.tree] = {}
    for q = n2, n - 1 do leaves[tree.tree][q] = 0 end
  end
  local tail = {}
  for q = n2, n - 1 do tail[#tail + 1] = istr(q) end
  if #holes > 0 then
    local moved = hmget_all(P .. 'dense', from)
    local mrecs = hmget_all(P .. 'it', moved)
    local dense, newrecs = {}, {}
    for i, key in ipairs(moved) do
      local p, times, seq, _, inl = rec_unpack(mrecs[i])
      dense[#dense + 1] = istr(holes[i])
      dense[#dense + 1] = key
      newrecs[#newrecs + 1] = key
      newrecs[#newrecs + 1] = rec_pack(p, times, seq, holes[i], inl)
      for _, tree in ipairs(t.trees) do leaves[tree.tree][holes[i]] = weight(p, tree.exp) end
    end
    call_pairs('HSET', P .. 'dense', dense)
    call_pairs('HSET', P .. 'it', newrecs)
  end
  call_pairs('HDEL', P .. 'dense', tail)
  call_pairs('HDEL', P .. 'it', fields)
  call_pairs('ZREM', P .. 'pz', pz)
  if t.maxheap then call_pairs('ZREM', P .. 'pzn', pz) end
  if t.order then call_pairs('ZREM', P .. 'ko', ko) end
  if #pl > 0 then call_pairs('HDEL', P .. 'pl', pl) end
  if #dkeys > 0 then del_all(dkeys) end
  t.size = n2
  for _, tree in ipairs(t.trees) do tree_set(t, tree, leaves[tree.tree]) end
end

-- New priorities for held items: map key -> {p, rec} in the order of `order` (keys);
-- each takes the next seq (it was set last, for heap ties).
local function rt_set_priorities(t, order, newp, recs)
  local P = t.P
  local out, zrem, zadd, zaddn = {}, {}, {}, {}
  local leaves = {}
  for _, tree in ipairs(t.trees) do leaves[tree.tree] = {} end
  for i, key in ipairs(order) do
    local _, times, seq, pos, inl = rec_unpack(recs[i])
    local p = newp[i]
    local m = zmember(t.seq, key)
    zrem[#zrem + 1] = zmember(seq, key)
    zadd[#zadd + 1] = fstr(p)
    zadd[#zadd + 1] = m
    zaddn[#zaddn + 1] = fstr(-p)
    zaddn[#zaddn + 1] = m
    out[#out + 1] = istr(key)
    out[#out + 1] = rec_pack(p, times, t.seq, pos, inl)
    t.seq = t.seq + 1
    for _, tree in ipairs(t.trees) do leaves[tree.tree][pos] = weight(p, tree.exp) end
  end
  if #order == 0 then return end
  call_pairs('ZREM', P .. 'pz', zrem)
  call_pairs('ZADD', P .. 'pz', zadd)
  if t.maxheap then
    call_pairs('ZREM', P .. 'pzn', zrem)
    call_pairs('ZADD', P .. 'pzn', zaddn)
  end
  call_pairs('HSET', P .. 'it', out)
  for _, tree in ipairs(t.trees) do tree_set(t, tree, leaves[tree.tree]) end
end

-- -- selectors --------------------------------------------------------------------------

local DETERMINISTIC = {fifo = true, lifo = true, minheap = true, maxheap = true}

-- The first m keys of a deterministic selector's order.
local function first(t, kind, m)
  local P, out = t.P, {}
  if kind == 'fifo' or kind == 'lifo' then
    local got
    if kind == 'fifo' then
      got = redis.call('ZRANGE', P .. 'ko', 0, m - 1)
    else
      got = redis.call('ZRANGE', P .. 'ko', 0, m - 1, 'REV')
    end
    for i, v in ipairs(got) do out[i] = tonumber(v) end
    return out
  end
  local got = redis.call('ZRANGE', P .. (kind == 'minheap' and 'pz' or 'pzn'), 0, m - 1)
  for i, v in ipairs(got) do out[i] = zkey(v) end
  return out
end

-- A random selector's pick with random number r in [0, 1): pos and probability.
local function pick(t, role, r)
  local size = t.size
  if role.kind == 'prioritized' then
    local total = tree_total(t, role)
    if total > 0 then
      local pos, w = tree_find(t, role, r * total)
      return pos, w / total
    end
  end
  local pos = math.floor(r * size)
  if pos >= size then pos = size - 1 end
  return pos, 1 / size
end

local function key_at(t, pos) return tonumber(redis.call('HGET', t.P .. 'dense', istr(pos))) end

-- A random remover's victim when an item of priority p arrives at max_size: a held
-- key, or nil for the newcomer itself (each equally likely, or by weight).
local function victim(t, p, r)
  local role, size = t.r, t.size
  if role.kind == 'prioritized' then
    local w, total = weight(p, role.exp), tree_total(t, role)
    if total + w > 0 then
      local u = r * (total + w)
      if u >= total then return nil end
      return key_at(t, (tree_find(t, role, u)))
    end
  end
  local x = math.floor(r * (size + 1))
  if x >= size then return nil end
  return key_at(t, x)
end

-- A deterministic remover's choice for k arriving items with `excess` too many: held
-- keys to remove, and which arriving items (indices) are evicted on arrival. Evicting
-- the first in order one insert at a time keeps the last max_size in that order, so one
-- choice over held and arriving items gives the same result.
local function evictions(t, excess, items)
  local kind, k = t.r.kind, #items
  local drop = {}
  if kind == 'lifo' then  -- the arriving items are the newest: each evicts itself
    for j = k - excess + 1, k do drop[j] = true end
    return {}, drop
  end
  if kind == 'fifo' then
    local old = first(t, 'fifo', excess)
    for j = 1, excess - #old do drop[j] = true end
    return old, drop
  end
  local sign = kind == 'minheap' and 1 or -1
  local got = redis.call('ZRANGE', t.P .. (sign == 1 and 'pz' or 'pzn'), 0, excess - 1, 'WITHSCORES')
  local cands = {}
  for i = 1, #got, 2 do
    cands[#cands + 1] = {num(got[i + 1]), tonumber(string.sub(got[i], 1, 15)), zkey(got[i]), nil}
  end
  for j, e in ipairs(items) do cands[#cands + 1] = {sign * e.p, t.seq + j - 1, nil, j} end
  table.sort(cands, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    return x[2] < y[2]
  end)
  local old = {}
  for i = 1, excess do
    local c = cands[i]
    if c[4] then drop[c[4]] = true else old[#old + 1] = c[3] end
  end
  return old, drop
end

-- -- waiting ----------------------------------------------------------------------------

local function wake(t, wid)
  local key = t.P .. 'wk:' .. wid
  if redis.call('LLEN', key) == 0 then
    redis.call('RPUSH', key, 1)
    redis.call('PEXPIRE', key, WAKE_TTL)
  end
end

local function split_member(m)
  local sep = string.find(m, ':', 1, true)
  return tonumber(string.sub(m, 1, sep - 1)), string.sub(m, sep + 1)
end

-- Wake the oldest waiter of each direction if it can progress now (or the table is closed).
local function notify(t)
  for _, dir in ipairs({'i', 's'}) do
    local head = redis.call('ZRANGE', t.P .. 'w' .. dir, 0, 0)[1]
    if head then
      local need, wid = split_member(head)
      local go = t.closed
      if not go then
        if dir == 'i' then go = can_insert(t, need) else go = can_sample(t, need) end
      end
      if go then wake(t, wid) end
    end
  end
end

-- Register a waiter (or refresh its deadline, keeping its place).
local function reg_add(t, dir, member, now, wait_ms)
  local reg = t.P .. 'w' .. dir
  if not redis.call('ZSCORE', reg, member) then
    if redis.call('ZCARD', reg) == 0 then redis.call('HSET', t.meta, dir .. 'w_since', istr(now_us())) end
    t.arr = t.arr + 1
    redis.call('ZADD', reg, istr(t.arr), member)
  end
  redis.call('ZADD', reg .. ':dl', istr(now + wait_ms), member)
end

-- Deregister a waiter: true if it was registered. The wait clock of its direction
-- stops when the last one leaves.
local function reg_del(t, dir, member, now)
  local reg = t.P .. 'w' .. dir
  if redis.call('ZREM', reg, member) == 0 then return false end
  redis.call('ZREM', reg .. ':dl', member)
  if redis.call('ZCARD', reg) == 0 then
    local us = now_us()
    local since = tonumber(redis.call('HGET', t.meta, dir .. 'w_since') or us)
    redis.call('HINCRBY', t.meta, dir .. 'w_tot', istr(math.max(0, us - since)))
  end
  return true
end

-- Close the table: waiting inserts wake (and fail); the oldest sample wakes (served, or
-- OutOfRange, then the next).
local function rt_shut(t)
  redis.call('HSET', t.meta, 'closed', '1')
  t.closed = true
  for _, m in ipairs(redis.call('ZRANGE', t.P .. 'wi', 0, -1)) do
    local _, wid = split_member(m)
    wake(t, wid)
  end
  notify(t)
end

-- Forget the hold of sharded sample `wid` (its draws were never counted): true if held.
local function hold_drop(t, wid)
  local got = redis.call('HGET', t.P .. 'hold', wid)
  if not got then return false end
  t.held = t.held - math.floor(#got / 8)
  redis.call('HDEL', t.P .. 'hold', wid)
  redis.call('ZREM', t.P .. 'hold:dl', wid)
  redis.call('HSET', t.meta, 'held', istr(t.held))
  return true
end

-- Drop expired waiter registrations (a crashed waiter's), expired holds (a crashed
-- sharded sampler's) and expired producers: when the
-- last registered producer's process died without ending it, the table closes.
local function rt_reap(t, now)
  local any = false
  for _, dir in ipairs({'i', 's'}) do
    local reg = t.P .. 'w' .. dir
    for _, m in ipairs(redis.call('ZRANGE', reg .. ':dl', '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)) do
      reg_del(t, dir, m, now)
      any = true
    end
  end
  for _, w in ipairs(redis.call('ZRANGE', t.P .. 'hold:dl', '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)) do
    hold_drop(t, w)
    any = true
  end
  local producers = t.P .. 'producers'
  if redis.call('ZREMRANGEBYSCORE', producers, '-inf', now) > 0
      and redis.call('EXISTS', producers) == 0 and not t.closed then
    rt_shut(t)
  elseif any then
    notify(t)
  end
end

local function rt_begin(keys, gen)
  local t = rt_load(keys, gen)
  if not t then return nil, nil end
  local now = now_ms()
  rt_reap(t, now)
  return t, now
end

-- Staged payload keys of the refs among args[first..] (inline payloads start "AQ").
local function rt_drop_staged(P, args, first_arg)
  local ks = {}
  for i = first_arg, #args do
    if not inline(args[i]) then ks[#ks + 1] = P .. 'st:' .. args[i] end
  end
  if #ks > 0 then del_all(ks) end
end

-- -- the functions ----------------------------------------------------------------------

-- rt_insert: ARGV gen wid k wait_ms mode np nr prio*np rand*nr entry*k
-- (an entry is the ref of a payload staged at st:<ref> in the same transaction, or a
-- small payload itself; np is 0 for the default priority). Modes: go (all k or none),
-- part (progressive: the first m the limiter admits now, 1 <= m <= k, or none; it waits
-- for one), probe and pprobe (the same questions without entries: could it go now?)
-- -> {'ok', first key, m} | {'go'} ({'go', m} for pprobe: m admitted now) | {'wait'} |
-- {'closed', waited} | {'gone'}
local function rt_insert(keys, args)
  local np, nr = tonumber(args[6]), tonumber(args[7])
  local first_entry = 8 + np + nr
  local t, now = rt_begin(keys, args[1])
  if not t then
    rt_drop_staged(prefix(keys[1]), args, first_entry)
    return {'gone'}
  end
  local wid, k, wait_ms, mode = args[2], tonumber(args[3]), tonumber(args[4]), args[5]
  local part = mode == 'part' or mode == 'pprobe'
  local member = istr(part and 1 or k) .. ':' .. wid
  if t.closed then
    local was = reg_del(t, 'i', member, now)
    rt_drop_staged(t.P, args, first_entry)
    notify(t)
    return {'closed', was and 1 or 0}
  end
  local head = redis.call('ZRANGE', t.P .. 'wi', 0, 0)[1]
  if (head and head ~= member) or not can_insert(t, part and 1 or k) then
    rt_drop_staged(t.P, args, first_entry)
    reg_add(t, 'i', member, now, wait_ms)
    rt_save(t)
    return {'wait'}
  end
  if mode == 'probe' then return {'go'} end
  if part and not can_insert(t, k) then
    local lo, hi = 1, k - 1  -- can_insert is monotone in k: the largest m admitted now
    while lo < hi do
      local mid = math.floor((lo + hi + 1) / 2)
      if can_insert(t, mid) then lo = mid else hi = mid - 1 end
    end
    if mode == 'pprobe' then return {'go', lo} end
    local rest = {}
    for j = first_entry + lo, #args do rest[#rest + 1] = args[j] end
    rt_drop_staged(t.P, rest, 1)
    k = lo
  end
  if mode == 'pprobe' then return {'go', k} end
  local default = np == 0 and max_priority(t) or nil
  local base = t.next_key
  local items = {}
  for j = 1, k do
    items[j] = {key = base + j - 1, p = default or tonumber(args[7 + j]),
                entry = args[first_entry + j - 1]}
  end
  t.next_key = base + k
  local excess = t.size + k - t.max
  if excess <= 0 then
    rt_add(t, items)
  elseif DETERMINISTIC[t.r.kind] then
    local old, drop = evictions(t, excess, items)
    rt_remove(t, old)
    local keep, dropped = {}, {}
    for j, e in ipairs(items) do
      if drop[j] then dropped[#dropped + 1] = e.entry else keep[#keep + 1] = e end
    end
    rt_add(t, keep)
    rt_drop_staged(t.P, dropped, 1)
  else
    local room = t.max - t.size
    local head_items = {}
    for j = 1, room do head_items[j] = items[j] end
    rt_add(t, head_items)
    for j = room + 1, k do
      local v = victim(t, items[j].p, tonumber(args[7 + np + j]))
      if v then
        rt_remove(t, {v})
        rt_add(t, {items[j]})
      else
        rt_drop_staged(t.P, {items[j].entry}, 1)
      end
    end
  end
  t.inserts = t.inserts + k
  if excess > 0 then
    t.evictions = t.evictions + excess
    t.deletes = t.deletes + excess
  end
  reg_del(t, 'i', member, now)
  rt_save(t)
  notify(t)
  return {'ok', base, k}
end

-- Whether sample `member` of n may draw now (the oldest waiting sample, and admitted):
-- nil, or the reply saying why not, having registered it as a waiting sample (or, on a
-- closed table that cannot serve it, deregistered it: OutOfRange).
local function sample_gate(t, member, n, now, wait_ms)
  local head = redis.call('ZRANGE', t.P .. 'ws', 0, 0)[1]
  if (head and head ~= member) or not can_sample(t, n) then
    if t.closed and not (head and head ~= member) then
      reg_del(t, 's', member, now)
      notify(t)
      return {'oor', t.size}
    end
    reg_add(t, 's', member, now, wait_ms)
    rt_save(t)
    return {'wait'}
  end
  return nil
end

-- rt_sample: ARGV gen wid n wait_ms keep_ms rand*...  (n random numbers for a random
-- sampler). Copies the j-th draw's payload of 1 KiB or more to o:<wid>.<j> (the caller's
-- MGET and DEL follow in the same transaction); smaller payloads come in the reply. With
-- keep_ms > 0 the caller sent no transaction (a full server refuses MULTI): each copy
-- then expires after keep_ms, should the caller not reach its DEL.
-- -> {'ok', table size, draws, small} | {'wait'} | {'oor', size} | {'gone'}
-- draws: struct '<dddd' per draw: key, priority, probability, times sampled (counting
-- this draw); small: per draw its payload if it is small, else false
local function rt_sample(keys, args, defer)
  local t, now = rt_begin(keys, args[1])
  if not t then return {'gone'} end
  t.defer = defer  -- (a trajectory table's sample: steps freed here are deleted after)
  local wid, n, wait_ms, keep_ms = args[2], tonumber(args[3]), tonumber(args[4]), args[5]
  local member = istr(n) .. ':' .. wid
  local refused = sample_gate(t, member, n, now, wait_ms)
  if refused then return refused end
  local P, size0, mts = t.P, t.size, t.mts
  local out = P .. 'o:' .. wid .. '.'
  local dkeys, prios, probs, times, small = {}, {}, {}, {}, {}
  local recs = {}     -- key -> {p, times, seq, pos, inl}, as this batch leaves it
  local pending = {}  -- draws whose small payload is still to be read: j -> key
  local function load_recs(list)  -- keys (numbers) not yet in recs
    local fields = {}
    for _, key in ipairs(list) do
      if not recs[key] then fields[#fields + 1] = istr(key) end
    end
    local got = hmget_all(P .. 'it', fields)
    for i, f in ipairs(fields) do
      local p, tm, seq, pos, inl = rec_unpack(got[i])
      recs[tonumber(f)] = {p, tm, seq, pos, inl}
    end
  end
  local function emit(j, key, prob)  -- draw j is item `key`: count it, copy its payload
    local r = recs[key]
    r[2] = r[2] + 1
    dkeys[j], prios[j], probs[j], times[j] = key, r[1], prob, r[2]
    if r[5] == 1 then
      pending[j] = key
      small[j] = false
    else
      small[j] = false
      redis.call('COPY', P .. 'd:' .. istr(key), out .. j, 'REPLACE')
      if keep_ms ~= '0' then redis.call('PEXPIRE', out .. j, keep_ms) end
    end
  end
  local function flush()  -- read the small payloads drawn so far; write the records
    local js, fields = {}, {}
    for j, key in pairs(pending) do
      js[#js + 1] = j
      fields[#fields + 1] = istr(key)
    end
    if #fields > 0 then
      local got = hmget_all(P .. 'pl', fields)
      for i, j in ipairs(js) do small[j] = got[i] or '' end
    end
    pending = {}
    local upd = {}
    for key, r in pairs(recs) do
      upd[#upd + 1] = istr(key)
      upd[#upd + 1] = rec_pack(r[1], r[2], r[3], r[4], r[5])
    end
    call_pairs('HSET', P .. 'it', upd)
  end
  local used_up = {}
  if mts > 0 then t.sl = t.sl + n end
  if DETERMINISTIC[t.s.kind] then
    if mts == 0 then
      local key = first(t, t.s.kind, 1)[1]
      load_recs({key})
      for j = 1, n do emit(j, key, 1.0) end
    else  -- each item in order until used up, then the next
      local order = first(t, t.s.kind, n)
      load_recs(order)
      local j = 1
      for _, key in ipairs(order) do
        while j <= n and recs[key][2] < mts do
          emit(j, key, 1.0)
          j = j + 1
        end
        if recs[key][2] >= mts then used_up[#used_up + 1] = key end
        if j > n then break end
      end
    end
    flush()
  elseif mts == 0 then  -- n independent draws
    local posf, pr = {}, {}
    for j = 1, n do
      local pos, prob = pick(t, t.s, tonumber(args[5 + j]))
      posf[j], pr[j] = istr(pos), prob
    end
    local ks = hmget_all(P .. 'dense', posf)
    for j = 1, n do ks[j] = tonumber(ks[j]) end
    load_recs(ks)
    for j = 1, n do emit(j, ks[j], pr[j]) end
    flush()
  else  -- one draw at a time: an item used up leaves before the next draw
    for j = 1, n do
      local pos, prob = pick(t, t.s, tonumber(args[5 + j]))
      local key = key_at(t, pos)
      load_recs({key})
      emit(j, key, prob)
      flush()
      if recs[key][2] >= mts then
        rt_remove(t, {key})
        t.deletes = t.deletes + 1
      end
      recs = {}  -- a removal moves records: read them again
    end
  end
  if #used_up > 0 then
    rt_remove(t, used_up)
    t.deletes = t.deletes + #used_up
  end
  t.samples = t.samples + n
  local packed = {}
  for j = 1, n do packed[j] = struct.pack('<dddd', dkeys[j], prios[j], probs[j], times[j]) end
  reg_del(t, 's', member, now)
  rt_save(t)
  notify(t)
  return {'ok', size0, table.concat(packed), small}
end

-- -- a sharded sample: probe, hold, commit or release --------------------------------
-- A sample over several shards draws in each shard with rt_hold, which counts nothing
-- but reserves its draws against the limiter (meta 'held'), and counts them with
-- rt_commit once every shard has drawn; rt_release (or the hold's lease running out)
-- forgets them. So a sharded sample that ends early sampled nothing on any shard.

-- rt_probe: ARGV gen -> {'ok', size, total weight (the sampler's: the sum tree's total
-- for Prioritized, else the size), closed} | {'gone'}. It reaps (expired holds and
-- waiters come back here too).
local function rt_probe(keys, args)
  local t = rt_begin(keys, args[1])
  if not t then return {'gone'} end
  local w = t.size
  if t.s.kind == 'prioritized' then w = tree_total(t, t.s) end
  return {'ok', t.size, fstr(w), t.closed and 1 or 0}
end

-- rt_hold: ARGV gen wid n wait_ms lease_ms rand*n -> as rt_sample's reply (times
-- sampled as the commit will make them), the draws held, not counted: copies of large
-- payloads at o:<wid>.<j> expire after lease_ms, as does the hold.
local function rt_hold(keys, args)
  local t, now = rt_begin(keys, args[1])
  if not t then return {'gone'} end
  local wid, n, wait_ms, lease_ms = args[2], tonumber(args[3]), tonumber(args[4]), args[5]
  local member = istr(n) .. ':' .. wid
  hold_drop(t, wid)  -- (an earlier round's, should it be left: one hold per sample)
  local refused = sample_gate(t, member, n, now, wait_ms)
  if refused then return refused end
  local P, out = t.P, t.P .. 'o:' .. wid .. '.'
  local posf, pr = {}, {}
  for j = 1, n do
    local pos, prob = pick(t, t.s, tonumber(args[5 + j]))
    posf[j], pr[j] = istr(pos), prob
  end
  local ks = hmget_all(P .. 'dense', posf)
  local recs = hmget_all(P .. 'it', ks)
  local packed, small, held, times = {}, {}, {}, {}
  local smallf, smallj = {}, {}
  for j = 1, n do
    local key = tonumber(ks[j])
    local p, tm, _, _, inl = rec_unpack(recs[j])
    times[key] = (times[key] or tm) + 1
    packed[j] = struct.pack('<dddd', key, p, pr[j], times[key])
    held[j] = struct.pack('<d', key)
    small[j] = false
    if inl == 1 then
      smallf[#smallf + 1] = ks[j]
      smallj[#smallj + 1] = j
    else
      redis.call('COPY', P .. 'd:' .. ks[j], out .. j, 'REPLACE')
      redis.call('PEXPIRE', out .. j, lease_ms)
    end
  end
  if #smallf > 0 then
    local got = hmget_all(P .. 'pl', smallf)
    for i, j in ipairs(smallj) do small[j] = got[i] or '' end
  end
  redis.call('HSET', P .. 'hold', wid, table.concat(held))
  redis.call('ZADD', P .. 'hold:dl', istr(now + tonumber(lease_ms)), wid)
  t.held = t.held + n
  reg_del(t, 's', member, now)
  rt_save(t)
  notify(t)
  return {'ok', t.size, table.concat(packed), small}
end

-- rt_commit: ARGV gen wid -> {'ok'} (the held draws counted: times sampled of the
-- items still held, the samples) | {'lost'} (no such hold: its lease ran out) | {'gone'}
local function rt_commit(keys, args)
  local t = rt_begin(keys, args[1])
  if not t then return {'gone'} end
  local got = redis.call('HGET', t.P .. 'hold', args[2])
  if not got then return {'lost'} end
  local n = math.floor(#got / 8)
  local count, order = {}, {}
  for j = 1, n do
    local key = istr(struct.unpack('<d', got, 8 * (j - 1) + 1))
    if not count[key] then
      order[#order + 1] = key
      count[key] = 0
    end
    count[key] = count[key] + 1
  end
  hold_drop(t, args[2])
  local recs = hmget_all(t.P .. 'it', order)
  local upd = {}
  for i, key in ipairs(order) do
    if recs[i] then
      local p, tm, seq, pos, inl = rec_unpack(recs[i])
      upd[#upd + 1] = key
      upd[#upd + 1] = rec_pack(p, tm + count[key], seq, pos, inl)
    end
  end
  call_pairs('HSET', t.P .. 'it', upd)
  t.samples = t.samples + n
  rt_save(t)
  notify(t)
  return {'ok'}
end

-- rt_release: ARGV gen wid member: a sharded sample ends early: its hold (if any) is
-- forgotten, its registration (if any) dropped, the wake-up passed on. -> 1 | 0
local function rt_release(keys, args)
  local t = rt_load(keys, args[1])
  redis.call('DEL', prefix(keys[1]) .. 'wk:' .. args[2])
  if not t then return 0 end
  local was = hold_drop(t, args[2])
  reg_del(t, 's', args[3], now_ms())
  notify(t)
  return was and 1 or 0
end

-- rt_leave: ARGV gen dir(i|s) member wid: a waiter leaves early (cancelled, timed out,
-- failed): deregister it and pass the wake-up on. It holds nothing else.
local function rt_leave(keys, args)
  local t = rt_load(keys, args[1])
  redis.call('DEL', prefix(keys[1]) .. 'wk:' .. args[4])
  if not t then return 0 end
  local was = reg_del(t, args[2], args[3], now_ms())
  notify(t)
  return was and 1 or 0
end

-- rt_update: ARGV gen n key*n priority*n -> found ('1'/'0' per key). A key given twice
-- takes its last priority (and counts as set last).
local function rt_update(keys, args)
  local t = rt_begin(keys, args[1])
  if not t then return false end
  local n = tonumber(args[2])
  local fields = {}
  for i = 1, n do fields[i] = args[2 + i] end
  local recs = hmget_all(t.P .. 'it', fields)
  local last = {}
  for i = 1, n do last[fields[i]] = i end
  local found, order, newp, orecs = {}, {}, {}, {}
  for i = 1, n do
    found[i] = recs[i] and '1' or '0'
    if recs[i] and last[fields[i]] == i then
      order[#order + 1] = tonumber(fields[i])
      newp[#newp + 1] = tonumber(args[2 + n + i])
      orecs[#orecs + 1] = recs[i]
    end
  end
  rt_set_priorities(t, order, newp, orecs)
  rt_save(t)
  return table.concat(found)
end

-- rt_remove_keys: ARGV gen key* -> found ('1'/'0' per key; a repeated key: '1' for its
-- first). Each removal counts as a delete for the rate limiter.
local function rt_remove_keys(keys, args)
  local t = rt_begin(keys, args[1])
  if not t then return false end
  local fields = {}
  for i = 2, #args do fields[#fields + 1] = args[i] end
  local recs = hmget_all(t.P .. 'it', fields)
  local found, seen, gone = {}, {}, {}
  for i, f in ipairs(fields) do
    if recs[i] and not seen[f] then
      seen[f] = true
      found[i] = '1'
      gone[#gone + 1] = tonumber(f)
    else
      found[i] = '0'
    end
  end
  rt_remove(t, gone)
  t.deletes = t.deletes + #gone
  rt_save(t)
  notify(t)
  return table.concat(found)
end

-- rt_close: ARGV gen. Waiting inserts wake (and fail); the oldest sample wakes (served,
-- or OutOfRange, then the next).
local function rt_close(keys, args)
  local t = rt_begin(keys, args[1])
  if not t then return 0 end
  rt_shut(t)
  return 1
end

-- rt_producer: ARGV gen op(add|beat|done) ttl_ms clean id... -> {'ok', n} | {'closed'} |
-- {'gone'}. Registered producers (zset producers: id -> deadline, refreshed by the
-- heartbeat) of every process: the clean end of the last one closes the table, an
-- unclean end closes it at once.
local function rt_producer(keys, args)
  local t, now = rt_begin(keys, args[1])
  if not t then return {'gone'} end
  local reply, removed, last = producers_op(t.P, t.closed, now, args)
  if reply then return reply end
  if not t.closed and (args[4] ~= '1' or last) then
    rt_shut(t)
  end
  return {'ok', removed}
end

-- rt_stats (read-only): ARGV gen -> {size, inserts, samples, deletes, evictions,
-- insert wait us, sample wait us, inserts waiting, samples waiting, closed} or {}
local function rt_stats(keys, args)
  local t = rt_load(keys, args[1])
  if not t then return {} end
  local P, now = t.P, now_ms()
  local m = redis.call('HMGET', t.meta, 'iw_tot', 'iw_since', 'sw_tot', 'sw_since')
  local out = {t.size, t.inserts, t.samples, t.deletes, t.evictions}
  local us = now_us()
  for i, dir in ipairs({'i', 's'}) do
    local total = tonumber(m[2 * i - 1] or 0)
    if redis.call('EXISTS', P .. 'w' .. dir) == 1 then
      total = total + math.max(0, us - tonumber(m[2 * i] or us))
    end
    out[#out + 1] = total
  end
  out[#out + 1] = redis.call('ZCOUNT', P .. 'wi:dl', now, '+inf')
  out[#out + 1] = redis.call('ZCOUNT', P .. 'ws:dl', now, '+inf')
  out[#out + 1] = closed_now(P, t.closed, now) and 1 or 0
  return out
end

-- rt_open: ARGV gen kind max_size dtypes shapes names sampler remover mts limiter format
-- spi min_size lo hi skind sexp rkind rexp fanout order maxheap (for kind 'traj': the
-- TT_ lists below, the step fields' dtypes, shapes and names, the item cap derived)
-- -> {'created', gen} | {'exists', gen, kind, max_size, dtypes, shapes, names, sampler,
-- remover, mts, limiter, format}
local RT_SETTINGS = {'kind', 'max_size', 'dtypes', 'shapes', 'names', 'sampler', 'remover',
  'mts', 'limiter', 'format', 'shards', 'tags'}
local RT_DERIVED = {'spi', 'min_size', 'lo', 'hi', 'skind', 'sexp', 'rkind', 'rexp', 'fanout',
  'order', 'maxheap'}
local TT_SETTINGS = {'kind', 'max_steps', 'dtypes', 'shapes', 'names', 'length', 'stride',
  'sampler', 'remover', 'mts', 'limiter', 'format'}
local TT_DERIVED = {'spi', 'min_size', 'lo', 'hi', 'skind', 'sexp', 'rkind', 'rexp', 'fanout',
  'order', 'maxheap', 'max_size'}
local TT_COUNTERS = {'next_id', 'next_writer', 'writers', 'appended', 'stored', 'sevicted',
  'sfreed', 'wdropped'}
local function rt_open(keys, args)
  local meta = keys[1]
  local traj = args[2] == 'traj'
  local settings = traj and TT_SETTINGS or RT_SETTINGS
  local derived = traj and TT_DERIVED or RT_DERIVED
  if redis.call('EXISTS', meta) == 1 then
    local m = redis.call('HMGET', meta, 'gen', unpack(settings))
    table.insert(m, 1, 'exists')
    return m
  end
  local fv = {'gen', args[1]}
  for i, f in ipairs(settings) do
    fv[#fv + 1] = f
    fv[#fv + 1] = args[1 + i]
  end
  for i, f in ipairs(derived) do
    fv[#fv + 1] = f
    fv[#fv + 1] = args[1 + #settings + i]
  end
  local zeros = {'closed', 'next_key', 'inserts', 'samples', 'deletes', 'evictions', 'sl',
                 'seq', 'arr', 'iw_tot', 'sw_tot'}
  if traj then
    for _, f in ipairs(TT_COUNTERS) do zeros[#zeros + 1] = f end
  end
  for _, f in ipairs(zeros) do
    fv[#fv + 1] = f
    fv[#fv + 1] = '0'
  end
  redis.call('HSET', meta, unpack(fv))
  return {'created', args[1]}
end

-- rt_drop: delete table KEYS[1] with every key and payload; its waiters wake and find
-- it gone. -> 1 | 0 (no such table) | -1 (the name holds a queue); with ARGV 'tags':
-- delete nothing, {1, its stored tags (false before shards existed)} | 0 | -1
local function rt_drop(keys, args)
  local meta = keys[1]
  local kind = redis.call('HGET', meta, 'kind')
  if not kind then return 0 end
  if kind ~= 'table' and kind ~= 'traj' then return -1 end
  if args[1] == 'tags' then return {1, redis.call('HGET', meta, 'tags')} end
  local P = prefix(meta)
  if kind == 'traj' then RT_HOOKS.drop(P) end
  for _, dir in ipairs({'i', 's'}) do
    for _, m in ipairs(redis.call('ZRANGE', P .. 'w' .. dir, 0, -1)) do
      local key = P .. 'wk:' .. string.sub(m, string.find(m, ':', 1, true) + 1)
      redis.call('RPUSH', key, 0)
      redis.call('PEXPIRE', key, WAKE_TTL)
    end
  end
  local ks = {}
  for _, key in ipairs(redis.call('HKEYS', P .. 'it')) do ks[#ks + 1] = P .. 'd:' .. key end
  del_all(ks)
  local fanout = tonumber(redis.call('HGET', meta, 'fanout'))
  local size = tonumber(redis.call('HGET', meta, 'max_size'))
  local levels = {P .. 'it', P .. 'pl', P .. 'dense', P .. 'pz', P .. 'pzn', P .. 'ko', P .. 'wi',
                  P .. 'ws', P .. 'wi:dl', P .. 'ws:dl', P .. 'producers', P .. 'hold',
                  P .. 'hold:dl'}
  local j = 0
  while true do
    levels[#levels + 1] = P .. 't:s:' .. j
    levels[#levels + 1] = P .. 't:r:' .. j
    if size <= 1 then break end
    size = math.ceil(size / fanout)
    j = j + 1
  end
  del_all(levels)
  redis.call('DEL', meta)
  return 1
end

redis.register_function{function_name = 'rt_stats', callback = rt_stats, flags = {'no-writes'}}
redis.register_function{function_name = 'rt_open', callback = rt_open, flags = {'allow-oom'}}
redis.register_function('rt_insert', rt_insert)
-- Calls that free memory or only take must work when the server is full.
redis.register_function{function_name = 'rt_sample', callback = rt_sample, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_leave', callback = rt_leave, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_probe', callback = rt_probe, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_hold', callback = rt_hold, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_commit', callback = rt_commit, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_release', callback = rt_release, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_update', callback = rt_update, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_remove_keys', callback = rt_remove_keys,
                        flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_close', callback = rt_close, flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_producer', callback = rt_producer,
                        flags = {'allow-oom'}}
redis.register_function{function_name = 'rt_drop', callback = rt_drop, flags = {'allow-oom'}}
