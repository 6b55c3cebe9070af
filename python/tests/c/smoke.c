/* A C program on evanesco.h and libEvanescoC.so alone: every function called as the header
 * declares it (gcc checks the calls against the prototypes), a burst stacked from memory, an image
 * written and read back, the refusals' statuses and messages, a backdrop session. Built and run
 * by scripts/python-tests.sh; prints one line and exits 0 when every check holds. */
#include <evanesco.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "smoke.c:%d: check failed: %s\n", __LINE__, #cond);                                        \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static int32_t count_progress(void *context, const char *stage, int64_t done, int64_t total) {
    (void)stage;
    (void)done;
    (void)total;
    (*(int *)context)++;
    return 0;
}

int main(int argc, char **argv) {
    const char *folder = argc > 1 ? argv[1] : "/tmp";
    char *message = NULL, *json = NULL, *report = NULL;
    enum { W = 96, H = 64, N = 5 };
    static uint8_t frames[N][H][W][3];
    for (int k = 0; k < N; k++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < 3; c++) frames[k][y][x][c] = (uint8_t)((x * 7 + y * 3 + c * 50) % 251);
    /* A white square in a different place in each frame: the median keeps none of it. */
    for (int k = 0; k < N; k++)
        for (int y = 10; y < 20; y++)
            for (int x = 5 + k * 18; x < 15 + k * 18; x++) memset(frames[k][y][x], 255, 3);
    evn_image views[N];
    for (int k = 0; k < N; k++) {
        evn_image v = {frames[k], W, H, 3, 0, 0, 0, EVN_UINT8};
        views[k] = v;
    }
    printf("evanesco %s: ", evn_version());

    CHECK(evn_settings("stack", &json, &message) == EVN_OK && json && strstr(json, "\"kappa\""));
    evn_free(json);

    int calls = 0;
    evn_image merged;
    evn_status s = evn_stack(views, N, NULL, 0, "{\"align\": \"none\", \"merge\": \"median\"}", count_progress, &calls,
                             &merged, &report, &message);
    CHECK(s == EVN_OK);
    if (s == EVN_OK) {
        CHECK(merged.width == W && merged.height == H && merged.channels == 3 && merged.sample_type == EVN_UINT8);
        const uint8_t *m = merged.data;
        int worst = 0;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int expected = (x * 7 + y * 3) % 251, got = m[(y * W + x) * 3];
                if (abs(expected - got) > worst) worst = abs(expected - got);
            }
        CHECK(worst == 0);
        CHECK(calls > 0);
        CHECK(report && strstr(report, "\"frames_used\":5"));
        evn_free(merged.data);
        evn_free(report);
    } else {
        fprintf(stderr, "%s\n", message);
        evn_free(message);
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/smoke.png", folder);
    CHECK(evn_write_image(path, &views[0], "{\"overwrite\": true}", &message) == EVN_OK);
    evn_image back;
    CHECK(evn_read_image(path, &back, NULL, &message) == EVN_OK);
    CHECK(back.width == W && memcmp(back.data, frames[0], sizeof frames[0]) == 0);
    evn_free(back.data);

    CHECK(evn_write_image(path, &views[0], NULL, &message) == EVN_ERROR_FILE);
    CHECK(message && strstr(message, "already exists"));
    evn_free(message);
    CHECK(evn_stack(views, N, NULL, 0, "{\"kappa\": -1}", NULL, NULL, &merged, NULL, &message) == EVN_ERROR_SETTING);
    CHECK(message && strstr(message, "kappa"));
    CHECK(merged.data == NULL);
    evn_free(message);
    evn_image bad = views[0];
    bad.channels = 9;
    CHECK(evn_stack(&bad, 1, NULL, 0, NULL, NULL, NULL, &merged, NULL, &message) == EVN_ERROR_ARGUMENT);
    evn_free(message);
    evn_image map;
    CHECK(evn_read_depth(path, &map, NULL, NULL, NULL, &message) == EVN_ERROR_INPUT);
    evn_free(message);

    static float metres[H][W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) metres[y][x] = (x > 30 && x < 60 && y > 20 && y < 50) ? 1.0f : 3.0f;
    evn_image depth = {metres, W, H, 1, 0, 0, 0, EVN_FLOAT32};
    evn_backdrop *session = NULL;
    CHECK(evn_backdrop_new("{\"subject\": \"nearest\"}", NULL, NULL, &session, &message) == EVN_OK);
    evn_image out;
    CHECK(evn_backdrop_process(session, &views[0], &depth, &out, NULL, &message) == EVN_OK);
    CHECK(out.width == W && ((uint8_t *)out.data)[0] == 0);
    evn_free(out.data);
    evn_backdrop_free(session);

    evn_image photo_out;
    CHECK(evn_portrait(NULL, &views[0], &depth, "depth", "{\"effect\": \"blur\"}", &photo_out, NULL, &message) ==
          EVN_OK);
    evn_free(photo_out.data);

    printf("%s\n", failures ? "FAILED" : "every check holds");
    return failures ? 1 : 0;
}
