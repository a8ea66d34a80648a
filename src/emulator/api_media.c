/*
 * api_media: Bot API methods that send files and other media, and getFile: sendPhoto,
 * sendDocument, sendAudio, sendVideo, sendVoice, sendAnimation, sendMediaGroup (uploads as
 * multipart parts, earlier file_ids, or URLs, which are recorded but not fetched),
 * sendLocation, sendContact, sendDice. Captions go through the same checks and parse
 * modes as texts. Uploaded files get a file_id, a file_unique_id and a file_path for
 * downloads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emulator/handlers.h"

/* The uploaded bytes or stored file behind f; NULL after emu_fail. */
static emu_file *input_file(emu_req *r, const tg_input_file *f, const char *dir)
{
    if (f->kind != TG_INPUT_FILE_ID || !f->str) {
        emu_fail(r, 400, "there is no file in the request");
        return NULL;
    }
    if (!strncmp(f->str, "attach://", 9)) {
        const emu_field *x = r->form ? emu_form_get(r->form, f->str + 9) : NULL;
        if (!x || !x->is_file) {
            emu_fail(r, 400, "wrong file identifier/HTTP URL specified");
            return NULL;
        }
        if (x->value_len > EMU_UPLOAD_MAX) {
            emu_fail(r, 413, "Request Entity Too Large");
            return NULL;
        }
        emu_file *ef =
            emu_file_add(r->e, x->value, x->value_len, x->filename, x->content_type, dir);
        if (!ef)
            emu_fail(r, 500, "Internal Server Error: out of memory");
        return ef;
    }
    emu_file *ef = emu_file_for_bot(r->e, f->str, r->b->u.id);
    if (!ef && (!strncmp(f->str, "http://", 7) || !strncmp(f->str, "https://", 8))) {
        const char *slash = strrchr(f->str, '/');
        ef = emu_file_add(r->e, NULL, 0, slash && slash[1] ? slash + 1 : "file", NULL, dir);
    }
    if (!ef)
        emu_fail(r, 400, "wrong file identifier/HTTP URL specified");
    return ef;
}

int emu_h_get_file(emu_req *r)
{
    const tg_get_file_params *p = r->p;
    emu_file *f = emu_file_for_bot(r->e, p->file_id, r->b->u.id);
    if (!f)
        return emu_fail(r, 400, "invalid file_id");
    tg_file t = {.file_id = f->file_id, .file_unique_id = f->unique_id};
    t.file_size = (tg_opt_i64)TG_SOME((int64_t)f->len);
    if (f->len > EMU_DOWNLOAD_MAX)
        return emu_fail(r, 400, "file is too big");
    t.file_path = f->path;
    tg__codec_encode(&tg__t_file, &t, &r->w, 0);
    return 0;
}

/* Caption, reply and markup of any send* with media. */
static int media_common(emu_req *r, emu_chat *c, const char *caption, tg_parse_mode pm,
                        const tg_message_entity *ce, size_t nce, const tg_reply_parameters *rp,
                        const tg_reply_markup *rm, tg_message *m)
{
    char *text;
    if (emu_check_text(r, caption, pm.id, ce, nce, true, &text, &m->caption_entities,
                       &m->caption_entities_count))
        return -1;
    m->caption = text && *text ? text : NULL;
    if (emu_apply_reply(r, c, rp, m) || emu_apply_markup(r, c, rm, m))
        return -1;
    return emu_finish_send(r, c, m);
}

/* ---- the Bot API objects of a stored file ---- */

static tg_opt_i64 size_of(const emu_file *f)
{
    return (tg_opt_i64)TG_SOME((int64_t)f->len);
}

static int64_t opt_or(tg_opt_i64 v, int64_t def)
{
    return v.has ? v.v : def;
}

static tg_photo_size *photo_of(emu_req *r, const emu_file *f)
{
    tg_photo_size *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_photo_size){.file_id = f->file_id,
                         .file_unique_id = f->unique_id,
                         .width = 320,
                         .height = 320,
                         .file_size = size_of(f)};
    return x;
}

static tg_document *document_of(emu_req *r, const emu_file *f)
{
    tg_document *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_document){.file_id = f->file_id,
                       .file_unique_id = f->unique_id,
                       .file_name = f->name,
                       .mime_type = f->mime,
                       .file_size = size_of(f)};
    return x;
}

static tg_video *video_of(emu_req *r, const emu_file *f, tg_opt_i64 w, tg_opt_i64 h,
                          tg_opt_i64 duration)
{
    tg_video *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_video){.file_id = f->file_id,
                    .file_unique_id = f->unique_id,
                    .width = opt_or(w, 0),
                    .height = opt_or(h, 0),
                    .duration = opt_or(duration, 0),
                    .file_name = f->name,
                    .mime_type = f->mime,
                    .file_size = size_of(f)};
    return x;
}

static tg_audio *audio_of(emu_req *r, const emu_file *f, tg_opt_i64 duration, const char *performer,
                          const char *title)
{
    tg_audio *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_audio){.file_id = f->file_id,
                    .file_unique_id = f->unique_id,
                    .duration = opt_or(duration, 0),
                    .performer = performer,
                    .title = title,
                    .file_name = f->name,
                    .mime_type = f->mime,
                    .file_size = size_of(f)};
    return x;
}

int emu_h_send_photo(emu_req *r)
{
    const tg_send_photo_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    emu_file *f = c ? input_file(r, &p->photo, "photos") : NULL;
    if (!f)
        return -1;
    tg_message m = {.photo = photo_of(r, f), .photo_count = 1};
    m.has_media_spoiler = p->has_spoiler.has && p->has_spoiler.v;
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_document(emu_req *r)
{
    const tg_send_document_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    emu_file *f = c ? input_file(r, &p->document, "documents") : NULL;
    if (!f)
        return -1;
    tg_message m = {.document = document_of(r, f)};
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

/* The chat and the file of a send*; false after emu_fail. */
static bool get_media(emu_req *r, const tg_chat_id *cid, const tg_input_file *in, const char *dir,
                      emu_chat **c, emu_file **f)
{
    *c = emu_req_chat(r, cid, true);
    *f = *c ? input_file(r, in, dir) : NULL;
    return *f != NULL;
}

int emu_h_send_audio(emu_req *r)
{
    const tg_send_audio_params *p = r->p;
    emu_chat *c;
    emu_file *f;
    if (!get_media(r, &p->chat_id, &p->audio, "music", &c, &f))
        return -1;
    tg_message m = {.audio = audio_of(r, f, p->duration, p->performer, p->title)};
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_video(emu_req *r)
{
    const tg_send_video_params *p = r->p;
    emu_chat *c;
    emu_file *f;
    if (!get_media(r, &p->chat_id, &p->video, "videos", &c, &f))
        return -1;
    tg_message m = {.video = video_of(r, f, p->width, p->height, p->duration),
                    .has_media_spoiler = p->has_spoiler.has && p->has_spoiler.v};
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_voice(emu_req *r)
{
    const tg_send_voice_params *p = r->p;
    emu_chat *c;
    emu_file *f;
    if (!get_media(r, &p->chat_id, &p->voice, "voice", &c, &f))
        return -1;
    tg_voice *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_voice){.file_id = f->file_id,
                    .file_unique_id = f->unique_id,
                    .duration = opt_or(p->duration, 0),
                    .mime_type = f->mime,
                    .file_size = size_of(f)};
    tg_message m = {.voice = x};
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_animation(emu_req *r)
{
    const tg_send_animation_params *p = r->p;
    emu_chat *c;
    emu_file *f;
    if (!get_media(r, &p->chat_id, &p->animation, "animations", &c, &f))
        return -1;
    tg_animation *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_animation){.file_id = f->file_id,
                        .file_unique_id = f->unique_id,
                        .width = opt_or(p->width, 0),
                        .height = opt_or(p->height, 0),
                        .duration = opt_or(p->duration, 0),
                        .file_name = f->name,
                        .mime_type = f->mime,
                        .file_size = size_of(f)};
    tg_message m = {.animation = x};
    return media_common(r, c, p->caption, p->parse_mode, p->caption_entities,
                        p->caption_entities_count, p->reply_parameters, &p->reply_markup, &m);
}

/* Replies and keyboards of a send* without a caption. */
static int plain_send(emu_req *r, emu_chat *c, const tg_reply_parameters *rp,
                      const tg_reply_markup *rm, tg_message *m)
{
    if (emu_apply_reply(r, c, rp, m) || emu_apply_markup(r, c, rm, m))
        return -1;
    return emu_finish_send(r, c, m);
}

int emu_h_send_location(emu_req *r)
{
    const tg_send_location_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    if (!c)
        return -1;
    if (p->latitude < -90 || p->latitude > 90 || p->longitude < -180 || p->longitude > 180)
        return emu_fail(r, 400, "wrong latitude or longitude specified");
    tg_location *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_location){.latitude = p->latitude,
                       .longitude = p->longitude,
                       .horizontal_accuracy = p->horizontal_accuracy,
                       .live_period = p->live_period,
                       .heading = p->heading};
    tg_message m = {.location = x};
    return plain_send(r, c, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_contact(emu_req *r)
{
    const tg_send_contact_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    if (!c)
        return -1;
    tg_contact *x = tg__arena_zalloc(r->a, sizeof *x);
    *x = (tg_contact){.phone_number = p->phone_number,
                      .first_name = p->first_name,
                      .last_name = p->last_name,
                      .vcard = p->vcard};
    tg_message m = {.contact = x};
    return plain_send(r, c, p->reply_parameters, &p->reply_markup, &m);
}

int emu_h_send_dice(emu_req *r)
{
    const tg_send_dice_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    if (!c)
        return -1;
    int32_t emoji = p->emoji.id ? p->emoji.id : TG_DICE_EMOJI_U1F3B2;
    if (emoji == TG_ENUM_UNKNOWN)
        return emu_fail(r, 400, "invalid dice emoji");
    /* 🎲 🎯 🎳 give 1-6, 🏀 ⚽ 1-5, 🎰 1-64 */
    int sides = emoji == TG_DICE_EMOJI_U1F3B0                                     ? 64
                : (emoji == TG_DICE_EMOJI_U1F3C0 || emoji == TG_DICE_EMOJI_U26BD) ? 5
                                                                                  : 6;
    tg_dice *x = tg__arena_zalloc(r->a, sizeof *x);
    x->emoji = (tg_dice_emoji){emoji, tg__codec_enum_str(&tg__e_dice_emoji, emoji)};
    x->value = 1 + (int64_t)(random() % sides);
    tg_message m = {.dice = x};
    return plain_send(r, c, p->reply_parameters, &p->reply_markup, &m);
}

/* ---- albums ---- */

/* Caption fields shared by every InputMedia member. */
typedef struct album_caption {
    const char *text;
    tg_parse_mode pm;
    const tg_message_entity *ents;
    size_t n;
} album_caption;

/* The message for item it (files resolved, caption parsed), without sending it. */
static int album_item(emu_req *r, const tg_input_media_group_item *it, tg_message *m)
{
    album_caption cap = {0};
    const tg_input_file *in;
    const char *dir;
    switch (it->kind) {
    case TG_INPUT_MEDIA_GROUP_ITEM_PHOTO:
        in = &it->photo->media, dir = "photos";
        cap = (album_caption){it->photo->caption, it->photo->parse_mode,
                              it->photo->caption_entities, it->photo->caption_entities_count};
        break;
    case TG_INPUT_MEDIA_GROUP_ITEM_VIDEO:
        in = &it->video->media, dir = "videos";
        cap = (album_caption){it->video->caption, it->video->parse_mode,
                              it->video->caption_entities, it->video->caption_entities_count};
        break;
    case TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT:
        in = &it->document->media, dir = "documents";
        cap = (album_caption){it->document->caption, it->document->parse_mode,
                              it->document->caption_entities, it->document->caption_entities_count};
        break;
    case TG_INPUT_MEDIA_GROUP_ITEM_AUDIO:
        in = &it->audio->media, dir = "music";
        cap = (album_caption){it->audio->caption, it->audio->parse_mode,
                              it->audio->caption_entities, it->audio->caption_entities_count};
        break;
    default:
        return emu_fail(r, 400,
                        "this kind of media in an album is not emulated by "
                        "tgbot-emulator");
    }
    emu_file *f = input_file(r, in, dir);
    if (!f)
        return -1;
    char *text;
    if (emu_check_text(r, cap.text, cap.pm.id, cap.ents, cap.n, true, &text, &m->caption_entities,
                       &m->caption_entities_count))
        return -1;
    m->caption = text && *text ? text : NULL;
    switch (it->kind) {
    case TG_INPUT_MEDIA_GROUP_ITEM_PHOTO:
        m->photo = photo_of(r, f);
        m->photo_count = 1;
        break;
    case TG_INPUT_MEDIA_GROUP_ITEM_VIDEO:
        m->video = video_of(r, f, it->video->width, it->video->height, it->video->duration);
        break;
    case TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT:
        m->document = document_of(r, f);
        break;
    default:
        m->audio = audio_of(r, f, it->audio->duration, it->audio->performer, it->audio->title);
    }
    return 0;
}

/* Documents and audio only go with their own kind, as on Telegram. */
static bool album_kinds_ok(const tg_send_media_group_params *p)
{
    for (size_t i = 1; i < p->media_count; i++) {
        int a = p->media[0].kind, b = p->media[i].kind;
        bool solo_a =
            a == TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT || a == TG_INPUT_MEDIA_GROUP_ITEM_AUDIO;
        bool solo_b =
            b == TG_INPUT_MEDIA_GROUP_ITEM_DOCUMENT || b == TG_INPUT_MEDIA_GROUP_ITEM_AUDIO;
        if ((solo_a || solo_b) && a != b)
            return false;
    }
    return true;
}

int emu_h_send_media_group(emu_req *r)
{
    const tg_send_media_group_params *p = r->p;
    emu_chat *c = emu_req_chat(r, &p->chat_id, true);
    if (!c)
        return -1;
    if (p->media_count < 2 || p->media_count > 10)
        return emu_fail(r, 400, "an album must hold 2 to 10 media");
    if (!album_kinds_ok(p))
        return emu_fail(r, 400, "documents and audio can only be grouped with their own kind");
    tg_message *ms = tg__arena_zalloc(r->a, p->media_count * sizeof *ms);
    char group[32];
    snprintf(group, sizeof group, "%lld", (long long)(c->next_msg_id * 7919 + c->id));
    for (size_t i = 0; i < p->media_count; i++) {
        if (album_item(r, &p->media[i], &ms[i]))
            return -1; /* nothing sent: every item is checked first */
        ms[i].media_group_id = group;
    }
    if (emu_apply_reply(r, c, p->reply_parameters, &ms[0]))
        return -1;
    tg__jw_arr_begin(&r->w);
    for (size_t i = 0; i < p->media_count; i++)
        if (emu_finish_send(r, c, &ms[i]))
            return -1;
    tg__jw_arr_end(&r->w);
    return 0;
}
