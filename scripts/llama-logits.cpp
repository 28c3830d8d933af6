// Our probe into raw llama.cpp for fixtures: feeds a prompt of token ids (BOS not added: pass it
// in the ids), then decodes greedily for N steps, and writes every logits row it saw (one per
// prompt position, or only the last T with --tail T, then one per generated token but the last)
// as little-endian f32 to OUT.
// Prints {"vocab":V,"rows":R,"greedy":[...]} on stdout. Built by scripts/build-llama-cpp.sh.
//
//   llama-logits MODEL IDS_FILE OUT [--generate N] [--kv f16|f32] [--threads T] [--repack 0|1] [--tail T]
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

static int fail(const char * what) {
    fprintf(stderr, "llama-logits: %s\n", what);
    return 1;
}

static void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int argmax(const float * row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (row[i] > row[best]) best = i;
    return best;
}

int main(int argc, char ** argv) {
    if (argc < 4) return fail("usage: llama-logits MODEL IDS_FILE OUT [--generate N] [--kv f16|f32] [--threads T]");
    int generate = 0, threads = 2, repack = 1, tail = -1;
    ggml_type kv = GGML_TYPE_F16;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--generate")) generate = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repack")) repack = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tail")) tail = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv")) kv = !strcmp(argv[i + 1], "f32") ? GGML_TYPE_F32 : GGML_TYPE_F16;
        else return fail("unknown option");
    }
    std::vector<llama_token> ids;
    std::ifstream in(argv[2]);
    for (long id; in >> id;) ids.push_back((llama_token) id);
    if (ids.empty()) return fail("no token ids in IDS_FILE");
    const size_t first_row = tail < 0 || (size_t) tail >= ids.size() ? 0 : ids.size() - (size_t) tail;

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    // llama.cpp re-lays some block formats out for its CPU kernels unless told not to.
    mp.use_extra_bufts = repack != 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fail("cannot load model");
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) (ids.size() + generate + 8);
    // One batch for the prompt, computed in ubatches of at most 512 (a 8k-token ubatch would need
    // gigabytes for its attention scores).
    cp.n_batch = (uint32_t) ids.size();
    cp.n_ubatch = (uint32_t) std::min<size_t>(ids.size(), 512);
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = kv;
    // The plain attention path (KQ, softmax, KQV), as node-llama-cpp runs it by default.
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return fail("cannot create context");

    FILE * out = fopen(argv[3], "wb");
    if (!out) return fail("cannot open OUT");
    llama_batch batch = llama_batch_init((int32_t) ids.size(), 0, 1);
    for (size_t i = 0; i < ids.size(); i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i >= first_row;
    }
    batch.n_tokens = (int32_t) ids.size();
    if (llama_decode(ctx, batch)) return fail("decode failed");
    int rows = 0;
    for (size_t i = first_row; i < ids.size(); i++, rows++) fwrite(llama_get_logits_ith(ctx, (int32_t) i), sizeof(float), vocab, out);

    std::string greedy;
    llama_token next = argmax(llama_get_logits_ith(ctx, -1), vocab);
    for (int s = 0; s < generate; s++) {
        greedy += (s ? "," : "") + std::to_string(next);
        if (s + 1 == generate) break;
        llama_batch one = llama_batch_get_one(&next, 1);
        if (llama_decode(ctx, one)) return fail("decode failed");
        const float * row = llama_get_logits_ith(ctx, -1);
        fwrite(row, sizeof(float), vocab, out);
        rows++;
        next = argmax(row, vocab);
    }
    fclose(out);
    printf("{\"vocab\":%d,\"rows\":%d,\"greedy\":[%s]}\n", vocab, rows, greedy.c_str());
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
